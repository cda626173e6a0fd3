import { randomBytes } from 'node:crypto';
import { quoteForEcho } from '../answers/echo.js';
import { EdgeErrorCode } from '../errors.js';
import { ALLOWED_METHODS } from './http1-server.js';
import type { EdgeHttp2Request } from './http2-messages.js';

// What an HTTP/2 request is answered before routing (HTTP/1.1's `headProblem` counterpart), and an RFC 8441
// WebSocket (extended CONNECT, `:protocol websocket`) made the HTTP/1.1 upgrade the tunnel carries: the
// agent and the backend see GET, `Upgrade: websocket`, `Connection: Upgrade` and a Sec-WebSocket-Key the
// edge made (RFC 8441 §5: the key and the accept belong to HTTP/1.1's handshake, not HTTP/2's).

export interface Http2Problem {
  code: EdgeErrorCode;
  message: string;
  headers?: Readonly<Record<string, string>>;
}

/**
 * Why `req` is answered before routing, or undefined when it goes on. A `:protocol websocket` request (the
 * edge announces SETTINGS_ENABLE_CONNECT_PROTOCOL, http2-server.ts) is turned into an HTTP/1.1 upgrade in
 * place (`isHttp2WebSocket` says so afterwards).
 */
export function http2RequestProblem(req: EdgeHttp2Request): Http2Problem | undefined {
  if (req.hostConflict !== undefined) {
    // RFC 9113 §8.3.1: routing by either would let a client aim the edge's checks at one tunnel and its
    // request at another (a proxy in front that reads the other field).
    return {
      code: EdgeErrorCode.BAD_REQUEST,
      message:
        `malformed HTTP/2 request: host ${quoteForEcho(req.hostConflict)} names another authority than ` +
        `:authority ${quoteForEcho(String(req.headers[':authority']))} (RFC 9113 §8.3.1)`,
    };
  }
  if (req.method !== 'CONNECT') return undefined;
  const protocol = req.headers[':protocol'];
  if (protocol === undefined) {
    return {
      code: EdgeErrorCode.METHOD_NOT_ALLOWED,
      message: 'CONNECT is not served: this edge is not a forward proxy',
      headers: { allow: ALLOWED_METHODS },
    };
  }
  if (protocol !== 'websocket') {
    // As Envoy: only the protocols the edge can carry are accepted (501, not a tunnel of unknown bytes).
    return {
      code: EdgeErrorCode.UPGRADE_UNSUPPORTED,
      message: `only WebSockets are tunnelled over extended CONNECT, not :protocol ${quoteForEcho(String(protocol))}`,
    };
  }
  asWebSocketUpgrade(req);
  return undefined;
}

/** Whether `req` is an RFC 8441 WebSocket, made an HTTP/1.1 upgrade by `http2RequestProblem`. */
export function isHttp2WebSocket(req: EdgeHttp2Request): boolean {
  return req.headers[':protocol'] === 'websocket' && req.method === 'GET';
}

/**
 * The request as HTTP/1.1's WebSocket handshake: GET, `Upgrade: websocket` (session-routing.ts adds it and
 * `Connection: Upgrade` to the backend's head, as for an HTTP/1.1 upgrade), and a fresh Sec-WebSocket-Key
 * in place of any the client sent (HTTP/2 has none; the backend's Sec-WebSocket-Accept answers this one and
 * is dropped on the way back). Sec-WebSocket-Version, -Protocol and -Extensions pass as the client sent them.
 */
function asWebSocketUpgrade(req: EdgeHttp2Request): void {
  const key = randomBytes(16).toString('base64');
  req.method = 'GET';
  req.headers.upgrade = 'websocket';
  req.headers.connection = 'Upgrade';
  req.headers['sec-websocket-key'] = key;
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    if (raw[i]!.toLowerCase() === 'sec-websocket-key') raw.splice(i, 2);
  }
  raw.push('Sec-WebSocket-Key', key);
}
