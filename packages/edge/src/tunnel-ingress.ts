import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  ErrorCode,
  encodeRequestHead,
  type MuxStream,
  ProtocolError,
  ProtocolErrorCode,
  type RawHeaders,
  withoutHopByHop,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { rejectUpgrade, sendEdgeError } from './error-response.js';
import { EdgeErrorCode } from './errors.js';
import type { InFlight } from './in-flight.js';
import { type IngressRoute, isValidSessionName } from './ingress-route.js';
import type { SessionTable } from './session-table.js';
import { TunnelExchange } from './tunnel-exchange.js';
import { UpgradeTunnel } from './upgrade-tunnel.js';

export interface TunnelIngressOptions {
  sessions: SessionTable;
  responseTimeoutMs: number;
  logger: Logger;
  /** Counts requests in flight (for drain and metrics). */
  inFlight: InFlight;
  maxRequestBodyBytes: number;
}

interface Refusal {
  code: EdgeErrorCode;
  message: string;
  retryAfterS?: number;
  headers?: Record<string, string>;
}

type Opened = { stream: MuxStream; payload: Buffer } | { refusal: Refusal } | { missing: string };

/** Finds the route's session, encodes the request head and opens its stream — or says why not. */
function openTunnelStream(
  req: IncomingMessage,
  route: IngressRoute,
  options: TunnelIngressOptions,
  upgrade: boolean,
): Opened {
  const connection = options.sessions.get(route.name);
  if (connection === undefined || !connection.ready) return { missing: route.name };
  const verdict = connection.protection?.check(req);
  if (verdict !== undefined && !verdict.ok) {
    return {
      refusal: {
        code: verdict.status === 401 ? EdgeErrorCode.PUBLIC_AUTH_REQUIRED : EdgeErrorCode.PUBLIC_IP_FORBIDDEN,
        message: verdict.message,
        ...(verdict.status === 401
          ? { headers: { 'www-authenticate': 'Basic realm="tunnel2", charset="UTF-8"' } }
          : {}),
      },
    };
  }
  if (connection.session.draining) {
    return {
      refusal: {
        code: EdgeErrorCode.TUNNEL_BUSY,
        message: `tunnel ${route.name} is restarting: retry shortly`,
        retryAfterS: 1,
      },
    };
  }
  const headers = forwardedHeaders(req, route);
  // An upgrade keeps the two fields that ask for it; everything else hop-by-hop is dropped.
  if (upgrade) headers.push('Connection', 'Upgrade', 'Upgrade', String(req.headers.upgrade));
  let payload: Buffer;
  try {
    payload = encodeRequestHead(
      { method: req.method ?? 'GET', target: route.target, headers },
      connection.session.peerSettings.maxFrameSize,
    );
  } catch (err) {
    const tooLarge = err instanceof ProtocolError && err.code === ProtocolErrorCode.HEAD_TOO_LARGE;
    return {
      refusal: tooLarge
        ? {
            code: EdgeErrorCode.HEADERS_TOO_LARGE,
            message: `request head too large for the tunnel: ${(err as Error).message}`,
          }
        : { code: EdgeErrorCode.BAD_REQUEST, message: 'request head cannot be carried through the tunnel' },
    };
  }
  try {
    return { stream: connection.openStream(), payload };
  } catch {
    return {
      refusal: {
        code: EdgeErrorCode.TUNNEL_BUSY,
        message: `tunnel ${route.name} has too many requests in flight`,
        retryAfterS: 1,
      },
    };
  }
}

/** Carries one routed public request into its session's tunnel, or answers why it cannot. */
export function handleTunnelRequest(
  req: IncomingMessage,
  res: ServerResponse,
  route: IngressRoute,
  options: TunnelIngressOptions,
): void {
  const opened = openTunnelStream(req, route, options, false);
  if ('missing' in opened) {
    void missingSession(opened.missing, options.sessions).then((r) =>
      sendEdgeError(res, r.code, r.message, r.retryAfterS),
    );
    return;
  }
  if ('refusal' in opened) {
    const { code, message, retryAfterS, headers } = opened.refusal;
    sendEdgeError(res, code, message, retryAfterS, headers);
    return;
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > options.maxRequestBodyBytes) {
    opened.stream.reset(ErrorCode.CANCEL);
    sendEdgeError(
      res,
      EdgeErrorCode.BODY_TOO_LARGE,
      `request body of ${declared} bytes exceeds this edge's limit of ${options.maxRequestBodyBytes}`,
    );
    return;
  }
  const { stream, payload } = opened;
  const inFlight = options.inFlight;
  inFlight.start();
  const exchange = new TunnelExchange(req, res, stream, {
    name: route.name,
    responseTimeoutMs: options.responseTimeoutMs,
    maxRequestBodyBytes: options.maxRequestBodyBytes,
    onFinish: () => inFlight.finish(),
  });
  const hasBody = requestHasBody(req);
  stream.sendHeaders(payload, !hasBody);
  if (hasBody) exchange.pumpRequestBody();
  else req.resume();
}

/** Carries a public WebSocket upgrade into the tunnel: the backend's answer decides what happens next. */
export function handleTunnelUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: IngressRoute,
  options: TunnelIngressOptions,
): void {
  const opened = openTunnelStream(req, route, options, true);
  if ('missing' in opened) {
    void missingSession(opened.missing, options.sessions).then((r) => rejectUpgrade(socket, r));
    return;
  }
  if ('refusal' in opened) {
    rejectUpgrade(socket, opened.refusal);
    return;
  }
  const { stream, payload } = opened;
  options.inFlight.start();
  const tunnel = new UpgradeTunnel(socket, stream, {
    name: route.name,
    responseTimeoutMs: options.responseTimeoutMs,
    onFinish: () => options.inFlight.finish(),
  });
  stream.sendHeaders(payload, false);
  tunnel.pumpClientBytes(head);
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

async function missingSession(name: string, sessions: SessionTable): Promise<Refusal> {
  if (!isValidSessionName(name)) {
    return {
      code: EdgeErrorCode.UNKNOWN_SESSION,
      message: `no tunnel named "${name}": not a valid session name`,
    };
  }
  try {
    const record = await sessions.lookup(name);
    if (record !== undefined) {
      return {
        code: EdgeErrorCode.TUNNEL_OFFLINE,
        message: `tunnel ${name} is offline: its agent is not connected`,
        retryAfterS: 5,
      };
    }
  } catch {
    // A registry that cannot answer must not turn into a misleading 404.
    return {
      code: EdgeErrorCode.TUNNEL_OFFLINE,
      message: `tunnel ${name}: the session registry is unreachable`,
      retryAfterS: 5,
    };
  }
  return {
    code: EdgeErrorCode.UNKNOWN_SESSION,
    message: `no tunnel named "${name}" is connected to this edge`,
  };
}
