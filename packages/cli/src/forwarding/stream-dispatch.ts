import type { InspectorCapture } from '@tunnel2/inspector';
import { decodeTunnelTag, ErrorCode, type MuxSession, type MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { BackendQueue } from './backend-queue.js';
import { ForwardExchange } from './forward-exchange.js';
import type { ForwardOptions, HostHeaderMode, RequestReport } from './forward-options.js';
import type { H2Backend } from './http2/h2-backend.js';
import { traceStream } from './request-trace.js';
import type { Target, TcpTarget } from './target.js';
import { forwardTcpStream, type TcpConnectionReport } from './tcp-forward.js';

// What a session forwards to is declared here, beside the dispatch that reads it, not in agent-session.ts:
// the session imports this module, and a type imported back would close a circle.

/** An HTTP tunnel's session: every stream is a request for the backend. */
export interface HttpForwarding {
  /** The backend pool behind the agent's own line of waiting requests. */
  backend: BackendQueue;
  target: Target;
  hostHeader: HostHeaderMode;
  onReport: (report: RequestReport) => void;
  /** An upgrade reset for the early bytes an older edge sent (see ForwardOptions). */
  onEarlyBytesOverLimit?: (() => void) | undefined;
  /** The inspector's hook, when it is on. */
  capture?: InspectorCapture | undefined;
  /** The HTTP/2 backend, for `--h2c` and https:// targets without `--http1`. */
  h2?: H2Backend | undefined;
}

/** A TCP tunnel's session: every stream is a public client's connection for the target. */
export interface TcpForwarding {
  /** The port asked of the edge (undefined for whichever is free). */
  remotePort: number | undefined;
  target: TcpTarget;
  /** How long a connect to the target may take (TCP_CONNECT_TIMEOUT_MS when left out). */
  connectTimeoutMs?: number | undefined;
  onConnection: (report: TcpConnectionReport) => void;
}

/** Where one tunnel's streams go: its HTTP backend or its TCP target. */
export type Forwarding = { http: HttpForwarding; tcp?: undefined } | { tcp: TcpForwarding; http?: undefined };

/** Hands a stream the edge opened to its tunnel's forwarder, which takes `stream.handler` over. */
export function forwardStream(
  stream: MuxStream,
  forwarding: Forwarding,
  session: MuxSession,
  logger: Logger,
): void {
  if (forwarding.tcp !== undefined) {
    const tcp = forwarding.tcp;
    forwardTcpStream(stream, tcp.target, tcp.onConnection, tcp.connectTimeoutMs);
    return;
  }
  const http = forwarding.http;
  const maxHeadSize = session.peerSettings.maxFrameSize;
  // Request ids are traced only when the log level asks for them (see traceStream).
  if (!logger.isLevelEnabled('info')) {
    // Untraced, every stream of the tunnel is given the same options: made once, not per request.
    let options = sharedOptions.get(http);
    if (options === undefined || options.maxHeadSize !== maxHeadSize) {
      options = forwardOptions(http, maxHeadSize, http.onReport);
      sharedOptions.set(http, options);
    }
    new ForwardExchange(stream, options);
    return;
  }
  let onReport = http.onReport;
  new ForwardExchange(
    stream,
    forwardOptions(http, maxHeadSize, (report) => onReport(report)),
  );
  onReport = traceStream(stream, logger, http.onReport);
}

/** The options an untraced tunnel's exchanges share, by the tunnel's forwarding (one per session). */
const sharedOptions = new WeakMap<HttpForwarding, ForwardOptions>();

function forwardOptions(
  http: HttpForwarding,
  maxHeadSize: number,
  onReport: (report: RequestReport) => void,
): ForwardOptions {
  return {
    backend: http.backend,
    target: http.target,
    hostHeader: http.hostHeader,
    onEarlyBytesOverLimit: http.onEarlyBytesOverLimit,
    maxHeadSize,
    capture: http.capture,
    h2: http.h2,
    onReport,
  };
}

/**
 * A session carrying several tunnels: the first head of each stream says which (a tunnel tag, or none for
 * the session's own tunnel). The stream goes to that tunnel's forwarder with the head untagged; a tag this
 * agent never asked for, or a malformed one, resets the stream with PROTOCOL_ERROR and forwards nothing.
 */
export function dispatchStream(
  stream: MuxStream,
  tunnels: readonly Forwarding[],
  session: MuxSession,
  logger: Logger,
): void {
  stream.handler = {
    onHeaders(payload, endStream) {
      let index: number;
      let head: Buffer;
      try {
        ({ index, head } = decodeTunnelTag(payload));
      } catch {
        stream.reset(ErrorCode.PROTOCOL_ERROR);
        return;
      }
      const forwarding = tunnels[index];
      if (forwarding === undefined) {
        logger.warn({ stream: stream.id, tunnel: index }, 'stream for a tunnel this agent did not ask for');
        stream.reset(ErrorCode.PROTOCOL_ERROR);
        return;
      }
      forwardStream(stream, forwarding, session, logger);
      stream.handler?.onHeaders(head, endStream);
    },
    onData() {},
    onEnd() {},
    onReset() {},
    onDrain() {},
  };
}
