import type { Socket } from 'node:net';
import {
  ANY_TCP_PORT,
  ErrorCode,
  type Hello,
  MuxSession,
  maskingNeeded,
  negotiateVersion,
  ownVersionRange,
  type ProtocolSettings,
  sendCorkedPieces,
  TCP_STREAM_KIND,
  type TcpPortAsk,
  TUNNEL_STREAM_KIND,
  type VersionRange,
  zeroMask,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { AgentError, AgentErrorCode } from '../errors.js';
import {
  dispatchStream,
  type Forwarding,
  forwardStream,
  type HttpForwarding,
  type TcpForwarding,
} from '../forwarding/stream-dispatch.js';
import { notAnEdge, unreachable } from './connect-failure-text.js';
import { type RefusalContext, refusalMessage } from './refusal-message.js';
import {
  type ExtraTunnelAnswer,
  readExtraAnswers,
  readSessionInfo,
  type SessionInfo,
} from './session-info.js';
import { edgeRangeOf, versionMismatch } from './version-mismatch.js';

// Not an `import`: an ESM import of node:crypto reads every export, and its `webcrypto` getter loads Web
// Crypto, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { createHmac } = process.getBuiltinModule('node:crypto');

export type { ExtraTunnelAnswer, SessionInfo } from './session-info.js';

export type AgentSessionOptions = SessionOptions &
  ({ http: HttpForwarding; tcp?: undefined } | { tcp: TcpForwarding; http?: undefined });

interface SessionOptions {
  server: string;
  agentPath: string;
  name: string | undefined;
  token: string | undefined;
  /** Identifies this agent process so reconnects resume its name without a token. */
  agentKey: string;
  /** Join the name beside the owner's other agents rather than take it over (`--replica`). */
  replica?: boolean | undefined;
  /** This run's id (one per Tunnel): the edge refuses a name to another run of the same key while it is live. */
  agentRun?: string | undefined;
  protocol: Partial<ProtocolSettings>;
  logger: Logger;
  version: string;
  /** Public URL protection for the edge to enforce (sent in HELLO). */
  protect: Record<string, unknown> | undefined;
  handshakeTimeoutMs: number;
  /** Where the session's own tunnel was asked for: its refusal says what to change there. */
  refusal?: RefusalContext | undefined;
  /** The protocol versions offered; only tests change it (to play an older or newer agent). */
  versions?: VersionRange | undefined;
  /**
   * Aborted when the tunnel closes while this connect is under way: it stops at once (the socket is
   * dropped) instead of waiting out the handshake timeout of an address that never answers.
   */
  signal?: AbortSignal | undefined;
  /**
   * More tunnels over this session (PROTOCOL.md "Several tunnels on one session"): what each asks of the
   * edge (`name`, `tcp`, `protect`) and where its streams go.
   */
  extras?: readonly ExtraTunnelAsk[] | undefined;
}

/** A live session's figures, read by the terminal's status header a few times a second. */
export interface SessionStats {
  /** The latest PING's round trip to the edge in ms; 0 until one came back. */
  rttMs: number;
  /** Requests (or TCP connections) in progress on this session. */
  openStreams: number;
  /** Either side announced GOAWAY: in-flight streams finish, no new ones come. */
  draining: boolean;
}

/** One more tunnel of a session: its ask in HELLO and its forwarder. */
export interface ExtraTunnelAsk {
  /** As the edge reads it from HELLO's `tunnels` (PROTOCOL.md "Several tunnels on one session"). */
  ask: {
    name: string | undefined;
    tcp: TcpPortAsk | undefined;
    protect: Record<string, unknown> | undefined;
  };
  forwarding: Forwarding;
}

export interface ConnectedSession {
  info: SessionInfo;
  stats(): SessionStats;
  /** One answer per listed tunnel, in order (empty when none were listed). */
  extras: ExtraTunnelAnswer[];
  /** The edge's HELLO ACK said `http2`: it serves HTTP/2 (and gRPC) to public clients. */
  edgeHttp2: boolean;
  /** Resolves when the session ends, with the reason when it was not a local close. */
  closed: Promise<Error | undefined>;
  /** Graceful: GOAWAY, wait for in-flight requests (up to graceMs), then close. */
  close(graceMs: number): Promise<void>;
  /** Called when the edge says the replica count changed (`info.replicas` already holds it). */
  onReplicas: ((count: number) => void) | undefined;
}

/** The WebSocket URL for an edge base URL: http→ws, https→wss, path joined. */
export function agentUrl(
  server: string,
  agentPath: string,
  name: string | undefined,
  tcp?: { remotePort: number | undefined },
  replica = false,
): string {
  const url = new URL(server);
  url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'wss:' : 'ws:';
  url.pathname = url.pathname.replace(/\/$/, '') + agentPath;
  if (name !== undefined) url.searchParams.set('name', name);
  // A TCP tunnel asks for its port as an HTTP one asks for its name (PROTOCOL.md "TCP streams").
  if (tcp !== undefined)
    url.searchParams.set('tcp', tcp.remotePort === undefined ? ANY_TCP_PORT : String(tcp.remotePort));
  // An edge older than replicas ignores it; its HELLO answer then lacks `replicas` (see onHello).
  if (replica) url.searchParams.set('replica', '1');
  return url.href;
}

/**
 * What an edge is told of the agent's key: a hash of it keyed to the edge's host name. The key lives for
 * years in the user's config directory and proves a name is theirs; an edge (anyone's, self-hosted) must not
 * learn what would let it claim the user's names on another. The host, not the origin: the nodes of a cluster
 * reached on their own ports, and the ws(s):// and http(s):// forms of one --server, are one edge, where a
 * restart after a crash must reclaim its names through whichever it reaches.
 */
export function agentKeyFor(key: string, server: string): string {
  return createHmac('sha256', key).update(new URL(server).hostname).digest('base64url');
}

/** Opens one WebSocket to the edge, runs the handshake, and forwards every stream the edge opens. */
export function connectSession(options: AgentSessionOptions): Promise<ConnectedSession> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      'x-tunnel2-agent-key': agentKeyFor(options.agentKey, options.server),
    };
    if (options.agentRun !== undefined) headers['x-tunnel2-agent-run'] = options.agentRun;
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    const url = agentUrl(options.server, options.agentPath, options.name, options.tcp, options.replica);
    const socket = new WebSocket(url, {
      perMessageDeflate: false,
      // Masking exists to stop browser scripts from confusing plain-text proxies (RFC 6455 §10.3). Under TLS
      // or on loopback no such proxy can read the bytes, so a zero mask saves a copy of every message.
      ...(maskingNeeded(url) ? {} : { generateMask: zeroMask }),
      headers,
      handshakeTimeout: options.handshakeTimeoutMs,
      maxPayload: 8 * 1024 * 1024,
    });
    // Fragments, not joined messages: the session decodes them in place (no copy of a message spanning reads).
    socket.binaryType = 'fragments';
    // The connection beneath the WebSocket, once upgraded: ws takes over the response's socket.
    let beneath: Socket | undefined;
    socket.once('upgrade', (response) => {
      beneath = response.socket;
    });
    let settled = false;
    const versions = options.versions ?? ownVersionRange;
    let resolveClosed: (error: Error | undefined) => void = () => {};
    const closed = new Promise<Error | undefined>((r) => {
      resolveClosed = r;
    });
    let localClose = false;
    let replaced = false;
    /** The edge said GOAWAY(GOING_AWAY): it drains (a restart, or a cluster node handing its agents over). */
    let edgeLeaving = false;
    const fail = (error: AgentError): void => {
      if (settled) return;
      settled = true;
      reject(error);
    };
    options.signal?.addEventListener(
      'abort',
      () => {
        if (settled) return;
        fail(new AgentError(AgentErrorCode.EDGE_UNREACHABLE, 'connect cancelled: the tunnel is closing'));
        socket.terminate();
      },
      { once: true },
    );

    const extras = (options.extras ?? []).map((extra) => extra.forwarding);
    // Made once per session, not per stream: what every stream of it is forwarded by.
    const own: Forwarding = options.tcp !== undefined ? { tcp: options.tcp } : { http: options.http };
    const tunnels: readonly Forwarding[] = [own, ...extras];
    /** The session as handed out once the edge answered HELLO (its NOTICEs update its info). */
    let connected: ConnectedSession | undefined;
    const session = new MuxSession({
      role: 'agent',
      settings: options.protocol,
      transport: {
        // Fragments, as the edge sends them, so the edge's receive gets most of them as views of its reads;
        // corked, a message's fragments cost one write, not one each.
        sendPieces: (pieces, _size, done) => sendCorkedPieces(socket, beneath, pieces, done),
        close: (code, reason) => socket.close(code, reason),
      },
      handler: {
        onHello: (hello: Hello) => {
          try {
            negotiateVersion(hello, versions);
          } catch (err) {
            fail(versionMismatch(versions, hello, options.version, err));
            session.close(ErrorCode.VERSION_UNSUPPORTED, 'no common protocol version');
            return;
          }
          const info = readSessionInfo(hello.meta);
          if (info === undefined) {
            session.close(ErrorCode.PROTOCOL_ERROR, 'edge HELLO without session info');
            fail(new AgentError(AgentErrorCode.HANDSHAKE_FAILED, 'edge answered without a session name'));
            return;
          }
          if (options.tcp !== undefined && info.tcp === undefined) {
            // An edge older than TCP tunnels ignored the request and gave an HTTP tunnel instead. The
            // refusal is settled first: closing the session reports a handshake failure otherwise.
            fail(
              new AgentError(
                AgentErrorCode.TCP_UNSUPPORTED,
                'this edge does not support TCP tunnels (it is older than this agent)',
                { fatal: true },
              ),
            );
            session.close(ErrorCode.NO_ERROR, 'TCP tunnels are not supported by this edge');
            return;
          }
          if (options.replica === true && info.replicas === undefined) {
            fail(
              new AgentError(
                AgentErrorCode.REPLICAS_UNSUPPORTED,
                'this edge does not support replicas (--replica; it is older than this agent): upgrade the ' +
                  'edge, or run one agent per name',
                { fatal: true },
              ),
            );
            session.close(ErrorCode.NO_ERROR, 'replicas are not supported by this edge');
            return;
          }
          const answers = readExtraAnswers(hello.meta.tunnels, options.extras?.length ?? 0);
          if (answers === undefined) {
            fail(
              new AgentError(
                AgentErrorCode.MULTI_UNSUPPORTED,
                'this edge carries one tunnel per session (it is older than this agent): upgrade the edge, ' +
                  'or run one `tunnel2 http`/`tunnel2 tcp` per tunnel',
                { fatal: true },
              ),
            );
            session.close(ErrorCode.NO_ERROR, 'several tunnels per session are not supported by this edge');
            return;
          }
          settled = true;
          connected = {
            info,
            onReplicas: undefined,
            extras: answers,
            edgeHttp2: hello.meta.http2 === true,
            closed,
            close: (graceMs) => closeGracefully(graceMs),
            stats: () => ({
              rttMs: session.roundTrip.lastMs,
              openStreams: session.streams.size,
              draining: session.draining,
            }),
          };
          resolve(connected);
        },
        onStream: (stream) => {
          if (extras.length === 0) forwardStream(stream, own, session, options.logger);
          else dispatchStream(stream, tunnels, session, options.logger);
        },
        onNotice: (meta) => {
          const count = meta.replicas;
          if (connected === undefined || connected.info.replicas === undefined) return;
          // Only a change is news: an edge repeating itself (or a hostile one) prints nothing.
          if (!Number.isInteger(count) || (count as number) < 1 || count === connected.info.replicas) return;
          connected.info.replicas = count as number;
          connected.onReplicas?.(count as number);
        },
        onGoAway: (goAway) => {
          options.logger.info({ reason: goAway.reason }, 'edge is going away');
          if (goAway.code === ErrorCode.SESSION_REPLACED) replaced = true;
          if (goAway.code === ErrorCode.GOING_AWAY) edgeLeaving = true;
          // The edge refused our versions (before any HELLO of its own): its reason names its range.
          if (goAway.code === ErrorCode.VERSION_UNSUPPORTED)
            fail(versionMismatch(versions, edgeRangeOf(goAway.reason), options.version));
        },
        onIdle: () => onIdle?.(),
        onStreamError: (stream, err) => options.logger.error({ err, stream: stream.id }, 'forwarding failed'),
        onClose: (error) => {
          if (!settled) {
            fail(
              new AgentError(
                AgentErrorCode.HANDSHAKE_FAILED,
                `edge closed the session during the handshake`,
                {
                  cause: error,
                },
              ),
            );
          }
          if (replaced) {
            resolveClosed(
              new AgentError(
                AgentErrorCode.REPLACED,
                'another run with the same token or agent key took over this tunnel name: this one stops',
                {
                  fatal: true,
                },
              ),
            );
            return;
          }
          if (edgeLeaving && !localClose) {
            resolveClosed(
              new AgentError(
                AgentErrorCode.EDGE_GOING_AWAY,
                'the edge is restarting or handing this tunnel to another node',
                { cause: error },
              ),
            );
            return;
          }
          resolveClosed(localClose ? undefined : (error ?? new Error('connection to the edge closed')));
        },
      },
    });

    let onIdle: (() => void) | undefined;
    async function closeGracefully(graceMs: number): Promise<void> {
      localClose = true;
      session.goAway(ErrorCode.GOING_AWAY, 'agent shutting down');
      if (session.streams.size > 0 && !session.closed && graceMs > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, graceMs);
          onIdle = () => {
            clearTimeout(timer);
            resolve();
          };
          void closed.then(onIdle);
        });
      }
      session.close(ErrorCode.NO_ERROR, 'agent closed');
      await closed;
    }

    socket.on('open', () =>
      session.sendHello(
        {
          agent: `tunnel2/${options.version}`,
          // PROTOCOL.md "HTTP/2 and gRPC": this agent passes request trailers on and can speak HTTP/2 to its
          // backend, so the edge may send it gRPC calls.
          http2: true,
          ...(options.protect ? { protect: options.protect } : {}),
          // The stream kinds beyond HTTP this agent takes: the edge opens TCP streams only when listed.
          ...streamKinds(options),
          ...(extras.length > 0 ? { tunnels: options.extras?.map((extra) => extra.ask) } : {}),
        },
        false,
        versions,
      ),
    );
    socket.on('message', (data, isBinary) => {
      if (isBinary) session.receive(data as Buffer[]);
    });
    socket.on('close', (code, reason) => {
      session.transportClosed(
        localClose
          ? undefined
          : new Error(`edge closed the connection (${code}${reason.length ? `: ${reason}` : ''})`),
      );
    });
    socket.on('error', (err) => {
      if (!settled) {
        fail(
          new AgentError(AgentErrorCode.EDGE_UNREACHABLE, unreachable(options.server, err), {
            cause: err,
          }),
        );
      }
      session.transportClosed(err);
    });
    socket.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let read = false;
      // What is kept of the body is all that is read: a server whose body never ends (or is huge) must not
      // hold the connect for good (the handshake timeout does not run while bytes arrive).
      const BODY_KEPT = 4096;
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size < BODY_KEPT) return;
        res.destroy();
        answered();
      });
      res.on('end', () => answered());
      const answered = (): void => {
        if (read) return;
        read = true;
        const status = res.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString('utf8').trim().slice(0, 500);
        const header = res.headers['x-tunnel2-error'];
        const edgeCode = typeof header === 'string' ? header : undefined;
        const holderHeader = res.headers['x-tunnel2-name-holder'];
        const holder = typeof holderHeader === 'string' ? holderHeader : undefined;
        // An edge words its refusals in plain text; a proxy's error page (HTML) is left out.
        const ownWords = /^text\/plain/i.test(String(res.headers['content-type'] ?? ''));
        if (edgeCode === undefined && status < 500) {
          // Every edge answers a refusal with its code: whatever answered without one is something else
          // (a web server, a proxy's own page). Its body is not ours to print (often a whole HTML page).
          fail(
            new AgentError(
              AgentErrorCode.EDGE_REFUSED,
              notAnEdge(options.server, status, res.headers.location),
              {
                status,
                fatal: true,
              },
            ),
          );
          socket.terminate();
          return;
        }
        fail(
          new AgentError(
            AgentErrorCode.EDGE_REFUSED,
            refusalMessage(
              {
                status,
                edgeCode,
                text: (ownWords && text) || (res.statusMessage ?? ''),
                name: options.name,
                holder,
              },
              options.refusal,
            ),
            {
              status,
              edgeCode,
              fatal: status === 400 || status === 401 || status === 403 || status === 404 || status === 409,
            },
          ),
        );
        socket.terminate();
      };
    });
  });
}

/** What this agent lists in `streamKinds`: TCP when any of its tunnels is one, tags when it lists tunnels. */
function streamKinds(options: AgentSessionOptions): { streamKinds?: string[] } {
  const extras = options.extras ?? [];
  const kinds: string[] = [];
  if (options.tcp !== undefined || extras.some((extra) => extra.forwarding.tcp !== undefined))
    kinds.push(TCP_STREAM_KIND);
  if (extras.length > 0) kinds.push(TUNNEL_STREAM_KIND);
  return kinds.length > 0 ? { streamKinds: kinds } : {};
}
