import { once } from 'node:events';
import {
  createSecureServer,
  createServer,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { KeyPair } from './https-backend.js';

/** One stream the backend took: its request head (raw, in order) and the stream to answer on. */
export type H2Route = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, raw: string[]) => void;

export interface H2TestBackend {
  port: number;
  /** HTTP/2 connections (sessions) the backend accepted so far. */
  sessions: number;
  /** Request heads seen, in arrival order. */
  seen: IncomingHttpHeaders[];
  /** HTTP/1.1 requests taken (only with `allowHTTP1`): each is answered `h1 <path>`. */
  http1: number;
  /** What answers a path; unknown paths get 404. */
  routes: Map<string, H2Route>;
  close(): Promise<void>;
}

/**
 * An HTTP/2 backend written with node:http2: h2c with prior knowledge (as gRPC servers are), or, given a
 * key pair, TLS with ALPN `h2` (and `http/1.1` too with `allowHTTP1`, as most HTTPS servers offer).
 */
export async function startH2Backend(tls?: KeyPair & { allowHTTP1?: boolean }): Promise<H2TestBackend> {
  const server: Http2Server | Http2SecureServer =
    tls === undefined
      ? createServer()
      : createSecureServer({ key: tls.key, cert: tls.cert, allowHTTP1: tls.allowHTTP1 ?? false });
  const backend: H2TestBackend = {
    port: 0,
    sessions: 0,
    seen: [],
    http1: 0,
    routes: new Map(),
    close: async () => {
      const closed = once(server, 'close');
      server.close();
      for (const session of sessions) session.destroy();
      await closed;
    },
  };
  const sessions = new Set<import('node:http2').ServerHttp2Session>();
  server.on('session', (session) => {
    backend.sessions++;
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on(
    'stream',
    (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, raw: string[]) => {
      backend.seen.push(headers);
      // A stream reset under a route that still writes: the route's business, not an uncaught error.
      stream.on('error', () => {});
      const route = backend.routes.get(String(headers[':path']).split('?')[0] ?? '');
      if (route === undefined) {
        stream.respond({ ':status': 404 }, { endStream: true });
        return;
      }
      route(stream, headers, raw);
    },
  );
  // HTTP/1.1 requests arrive only as 'request'. Listened to only when taken: a 'request' listener turns
  // on node:http2's compatibility layer for HTTP/2 streams too, which then sends trailers of its own.
  if (tls?.allowHTTP1 === true) {
    server.on('request', (req, res) => {
      if (req.httpVersion !== '1.1') return;
      backend.http1++;
      res.end(`h1 ${req.url}`);
    });
  }
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  backend.port = (server.address() as AddressInfo).port;
  return backend;
}
