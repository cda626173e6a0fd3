import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  encodeRequestHead,
  ProtocolError,
  ProtocolErrorCode,
  type RawHeaders,
  withoutHopByHop,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { sendEdgeError } from './error-response.js';
import { EdgeErrorCode } from './errors.js';
import type { InFlight } from './in-flight.js';
import { type IngressRoute, isValidSessionName } from './ingress-route.js';
import type { SessionTable } from './session-table.js';
import { TunnelExchange } from './tunnel-exchange.js';

export interface TunnelIngressOptions {
  sessions: SessionTable;
  responseTimeoutMs: number;
  logger: Logger;
  /** Counts requests in flight (for drain and metrics). */
  inFlight: InFlight;
}

/** Carries one routed public request into its session's tunnel, or answers why it cannot. */
export function handleTunnelRequest(
  req: IncomingMessage,
  res: ServerResponse,
  route: IngressRoute,
  options: TunnelIngressOptions,
): void {
  const connection = options.sessions.get(route.name);
  if (connection === undefined || !connection.ready) {
    void answerMissingSession(res, route.name, options.sessions);
    return;
  }
  if (connection.session.draining) {
    sendEdgeError(res, EdgeErrorCode.TUNNEL_BUSY, `tunnel ${route.name} is restarting: retry shortly`, 1);
    return;
  }
  let payload: Buffer;
  try {
    payload = encodeRequestHead(
      { method: req.method ?? 'GET', target: route.target, headers: forwardedHeaders(req, route) },
      connection.session.peerSettings.maxFrameSize,
    );
  } catch (err) {
    if (err instanceof ProtocolError && err.code === ProtocolErrorCode.HEAD_TOO_LARGE) {
      sendEdgeError(
        res,
        EdgeErrorCode.HEADERS_TOO_LARGE,
        `request head too large for the tunnel: ${err.message}`,
      );
    } else {
      sendEdgeError(res, EdgeErrorCode.BAD_REQUEST, 'request head cannot be carried through the tunnel');
    }
    return;
  }
  let stream: ReturnType<typeof connection.openStream>;
  try {
    stream = connection.openStream();
  } catch {
    sendEdgeError(res, EdgeErrorCode.TUNNEL_BUSY, `tunnel ${route.name} has too many requests in flight`, 1);
    return;
  }
  const inFlight = options.inFlight;
  inFlight.start();
  const exchange = new TunnelExchange(req, res, stream, {
    name: route.name,
    responseTimeoutMs: options.responseTimeoutMs,
    onFinish: () => inFlight.finish(),
  });
  const hasBody = requestHasBody(req);
  stream.sendHeaders(payload, !hasBody);
  if (hasBody) exchange.pumpRequestBody();
  else req.resume();
}

/** A request has a body when it declares a non-zero length or uses a transfer coding (RFC 9112 §6.3). */
function requestHasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

function forwardedHeaders(req: IncomingMessage, route: IngressRoute): RawHeaders {
  const headers = withoutHopByHop(req.rawHeaders);
  const remote = req.socket.remoteAddress ?? '';
  let forwardedFor: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === 'x-forwarded-for') {
      forwardedFor = headers[i + 1];
      headers.splice(i, 2);
      i -= 2;
    }
  }
  headers.push('X-Forwarded-For', forwardedFor ? `${forwardedFor}, ${remote}` : remote);
  headers.push('X-Forwarded-Proto', 'encrypted' in req.socket ? 'https' : 'http');
  headers.push('X-Forwarded-Host', req.headers.host ?? '');
  if (route.via === 'path') headers.push('X-Forwarded-Prefix', `/session/${route.name}`);
  return headers;
}

async function answerMissingSession(
  res: ServerResponse,
  name: string,
  sessions: SessionTable,
): Promise<void> {
  if (!isValidSessionName(name)) {
    sendEdgeError(res, EdgeErrorCode.UNKNOWN_SESSION, `no tunnel named "${name}": not a valid session name`);
    return;
  }
  try {
    const record = await sessions.lookup(name);
    if (record !== undefined) {
      sendEdgeError(
        res,
        EdgeErrorCode.TUNNEL_OFFLINE,
        `tunnel ${name} is offline: its agent is not connected`,
        5,
      );
      return;
    }
  } catch {
    // A registry that cannot answer must not turn into a misleading 404.
    sendEdgeError(
      res,
      EdgeErrorCode.TUNNEL_OFFLINE,
      `tunnel ${name}: the session registry is unreachable`,
      5,
    );
    return;
  }
  sendEdgeError(res, EdgeErrorCode.UNKNOWN_SESSION, `no tunnel named "${name}" is connected to this edge`);
}
