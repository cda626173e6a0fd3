import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { rejectUpgrade } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import type { PublicConnections } from './public-connections.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { createServer } = process.getBuiltinModule('node:http');

export function isWebSocketUpgrade(req: IncomingMessage): boolean {
  return req.headers.upgrade?.toLowerCase() === 'websocket';
}

/** Methods a tunnel URL serves; CONNECT is the one it does not (the edge is not a forward proxy). */
export const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE';

/**
 * What Node's parser lets through but the edge refuses before routing: a request line without a version
 * (HTTP/0.9, which Node reports as 0.9), a 2.x version on this HTTP/1 port, or two Host fields, which
 * RFC 9112 §3.2 says to answer 400 (Node keeps the first; a proxy in front might have used the second).
 */
export function headProblem(req: IncomingMessage): { code: EdgeErrorCode; message: string } | undefined {
  if (req.httpVersionMajor === 0) {
    return { code: EdgeErrorCode.BAD_REQUEST, message: 'the request line has no HTTP version' };
  }
  if (req.httpVersionMajor !== 1) {
    return { code: EdgeErrorCode.HTTP_VERSION, message: 'this port speaks HTTP/1.0 and HTTP/1.1 only' };
  }
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host' && ++hosts > 1) {
      return { code: EdgeErrorCode.BAD_REQUEST, message: 'the request has more than one Host field' };
    }
  }
  return undefined;
}

export interface Http1ServerOptions {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxHeaderBytes: number;
  connections: PublicConnections;
  /** A request (with `Expect: 100-continue`, `expectsContinue`); the caller routes it. */
  onRequest: (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => void;
}

/**
 * The public HTTP/1.1 server (Fastify's, through its serverFactory), with the edge's bounds on slow clients
 * and its connection tracking. Whether it listens itself or is fed connections is public-listener.ts's.
 */
export function createHttp1Server(options: Http1ServerOptions): Server {
  const { connections, onRequest } = options;
  const server = createServer(
    {
      // Slow clients: a head must arrive within headersTimeout however slowly it trickles, a whole
      // request within requestTimeout (408 either way). Node checks these on an interval; a short one
      // makes the bound tight without a timer per request.
      headersTimeout: options.headersTimeoutMs,
      requestTimeout: options.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(options.headersTimeoutMs / 4)),
      keepAliveTimeout: options.keepAliveTimeoutMs,
      maxHeaderSize: options.maxHeaderBytes,
      // Only WebSocket upgrades leave HTTP; any other Upgrade (h2c, ...) is served as a plain request
      // with the Upgrade field dropped, as RFC 9110 §7.8 allows.
      shouldUpgradeCallback: (req: IncomingMessage) => isWebSocketUpgrade(req),
    },
    (req, res) => onRequest(req, res, false),
  );
  // When configured, a connection silent in both directions (a response stalled mid-body, a client that
  // stopped reading or sending) is closed; Node re-arms it on every read and write, no timer per request.
  // Off by default: a quiet SSE stream is silent too.
  server.setTimeout(options.idleTimeoutMs);
  server.on('connection', (socket: Socket) => connections.track(socket));
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => onRequest(req, res, true));
  // Without a listener Node drops a CONNECT by closing the connection; say why instead, everywhere.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    rejectUpgrade(socket, {
      code: EdgeErrorCode.METHOD_NOT_ALLOWED,
      message: 'CONNECT is not served: this edge is not a forward proxy',
      headers: { Allow: ALLOWED_METHODS },
    });
  });
  return server;
}
