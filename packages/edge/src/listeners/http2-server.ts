import type { Http2Server, IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { EdgeHttp2Request, EdgeHttp2Response, sessionSockets } from './http2-messages.js';

const { createServer } = process.getBuiltinModule('node:http2');

/**
 * HTTP/2's own protections on the public side, defaults as Envoy's and nginx's. Each is nghttp2's or
 * Node's mechanism; the edge only sets the bound (docs/reliability.md, "Hostile peers").
 */
export interface Http2Limits {
  /** Streams open at once per connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused. */
  maxConcurrentStreams: number;
  /** Decoded header list per request (SETTINGS_MAX_HEADER_LIST_SIZE); larger: the stream is refused. */
  maxHeaderListSize: number;
  /** Header fields per request (Node's maxHeaderListPairs). */
  maxHeaderListPairs: number;
  /** HPACK dynamic table size the edge decodes with (SETTINGS_HEADER_TABLE_SIZE). */
  headerTableSize: number;
  /** Memory one connection's nghttp2 state may hold, in MiB; past it new streams are refused. */
  maxSessionMemoryMiB: number;
  /** SETTINGS frames sent by the client and not yet acknowledged. */
  maxSettings: number;
  /** PINGs of the edge's own not yet acknowledged. */
  maxOutstandingPings: number;
  /**
   * Rapid reset (CVE-2023-44487): RST_STREAMs a client may send in a burst, then per second
   * (nghttp2's stream reset rate limit); past it the connection is closed with GOAWAY.
   */
  streamResetBurst: number;
  streamResetRate: number;
  /**
   * Receive window of each request body (SETTINGS_INITIAL_WINDOW_SIZE): what one stream's client may send
   * ahead of what the edge has passed into the tunnel. Node hands nothing back to the client while a
   * request is paused (the tunnel has no credit), so it is also what one stalled upload can hold here.
   */
  streamWindowBytes: number;
  /**
   * Receive window of a whole connection: what all its streams' clients may send ahead of the edge together,
   * and so what one connection's stalled uploads can hold at most.
   */
  connectionWindowBytes: number;
}

export const DEFAULT_HTTP2_LIMITS: Readonly<Omit<Http2Limits, 'maxHeaderListSize'>> = {
  maxConcurrentStreams: 100,
  maxHeaderListPairs: 256,
  headerTableSize: 4096,
  maxSessionMemoryMiB: 10,
  maxSettings: 32,
  maxOutstandingPings: 10,
  streamResetBurst: 200,
  streamResetRate: 100,
  // As the tunnel's own windows (PROTOCOL.md §11: 256 KiB per stream at first): Node's 64 KiB defaults
  // made every 64 KiB of an upload wait a WINDOW_UPDATE round trip (a gRPC stream through the tunnel moved
  // 0.3–0.4× its bytes per second direct). The connection's is the stream's × 16, well below 100 streams'.
  streamWindowBytes: 256 * 1024,
  connectionWindowBytes: 16 * 1024 * 1024,
};

export interface PublicHttp2Options {
  limits: Http2Limits;
  /** A connection with no open stream for this long is closed with GOAWAY (HTTP/1.1's keep-alive timeout). */
  idleTimeoutMs: number;
  logger: Logger;
  /** Each request, as the HTTP/1.1 server's 'request' (and 'checkContinue' with `expectsContinue`). */
  onRequest(req: EdgeHttp2Request, res: EdgeHttp2Response, expectsContinue: boolean): void;
}

/**
 * The public side's HTTP/2: Node's HTTP/2 server, never listening itself, fed connections that already
 * speak HTTP/2 — a plain one whose first bytes were the preface (preface-sniff.ts), or a TLS one whose
 * ALPN chose `h2`. Each stream (Node's raw 'stream' API, not its compatibility layer) becomes a request and
 * a response shaped as the shared path's (http2-messages.ts), so everything after parsing is HTTP/1.1's.
 */
export class PublicHttp2Server {
  readonly #server: Http2Server;
  readonly #sessions = new Set<ServerHttp2Session>();
  readonly #options: PublicHttp2Options;
  #draining = false;
  /** The connection being handed to Node's server, until its session has started. */
  #accepting: Duplex | undefined;
  #emptied: (() => void) | undefined;

  constructor(options: PublicHttp2Options) {
    this.#options = options;
    const { limits } = options;
    this.#server = createServer({
      maxSessionMemory: limits.maxSessionMemoryMiB,
      maxSettings: limits.maxSettings,
      maxOutstandingPings: limits.maxOutstandingPings,
      maxHeaderListPairs: limits.maxHeaderListPairs,
      streamResetBurst: limits.streamResetBurst,
      streamResetRate: limits.streamResetRate,
      // A field Node holds single-valued (Content-Type, ETag…) that a backend gave twice goes on as given,
      // as HTTP/1.1 passes it, rather than Node throwing on it as the head leaves (a reset instead of an
      // answer). Node versions without this option keep throwing: that one stream is then reset.
      strictSingleValueFields: false,
      settings: {
        maxConcurrentStreams: limits.maxConcurrentStreams,
        maxHeaderListSize: limits.maxHeaderListSize,
        headerTableSize: limits.headerTableSize,
        initialWindowSize: limits.streamWindowBytes,
        // RFC 8441: a browser opens its WebSockets as streams of this connection (http2-websocket.ts) only
        // when the edge announces it; otherwise it opens an HTTP/1.1 connection for each.
        enableConnectProtocol: true,
      },
    });
    // No 'request' listener: Node builds its compatibility objects only for one.
    this.#server.on('stream', this.#onStream);
    this.#server.on('session', (session: ServerHttp2Session) => this.#track(session));
    // A session's errors (a peer's protocol error, a reset socket) end that connection only.
    this.#server.on('sessionError', (err: Error) => options.logger.debug({ err }, 'HTTP/2 session error'));
  }

  /**
   * Each stream as a request and its response. CONNECT too: the edge refuses it in its own words. Expect as
   * Node's compatibility layer took it: 100-continue is the caller's (`expectsContinue`), any other
   * expectation is answered 417.
   */
  readonly #onStream = (
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    _flags: number,
    rawHeaders: string[],
  ): void => {
    const req = new EdgeHttp2Request(stream, headers, rawHeaders);
    const res = new EdgeHttp2Response(req);
    const expect = headers.expect;
    if (expect === undefined) this.#options.onRequest(req, res, false);
    else if (expect === '100-continue') this.#options.onRequest(req, res, true);
    else {
      res.writeHead(417);
      res.end();
    }
  };

  /** Serves a connection that speaks HTTP/2 from its first byte (any bytes read put back on it). */
  handle(socket: Duplex): void {
    // HTTP/2 has no half-closed connection: the client's FIN ends it. The plain listener accepts half-open
    // connections for HTTP/1.1's sake, and on one Node's session never notices the FIN: a client gone mid-
    // request (a closed tab, a lost network) left its session, its streams and their backend calls open.
    socket.allowHalfOpen = false;
    // Node starts the session ('session', #track) within this call: that is where the socket is recorded.
    this.#accepting = socket;
    try {
      this.#server.emit('connection', socket);
    } finally {
      this.#accepting = undefined;
    }
  }

  /**
   * Where HTTP/2 connections are announced: Node's server emits 'connection' with each socket `handle` is
   * given (the metrics count their bytes and refusals as the HTTP/1.1 server's).
   */
  get connections(): Pick<NodeJS.EventEmitter, 'on' | 'off'> {
    return this.#server;
  }

  /** Open HTTP/2 connections. */
  get size(): number {
    return this.#sessions.size;
  }

  /** The drain began: GOAWAY to every connection; their open streams finish, new ones go elsewhere. */
  drain(): void {
    this.#draining = true;
    for (const session of this.#sessions) session.close();
  }

  /** Resolves once every HTTP/2 connection has closed, or after `timeoutMs`. */
  closed(timeoutMs: number): Promise<void> {
    if (this.#sessions.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#emptied = done;
    });
  }

  /** Closes every connection now (the edge stops). */
  destroy(): void {
    for (const session of this.#sessions) session.destroy();
  }

  #track(session: ServerHttp2Session): void {
    if (this.#accepting !== undefined) sessionSockets.set(session, this.#accepting);
    if (this.#draining) {
      session.close();
      return;
    }
    this.#sessions.add(session);
    session.setLocalWindowSize(this.#options.limits.connectionWindowBytes);
    let open = 0;
    session.on('stream', (stream) => {
      open++;
      stream.once('close', () => open--);
    });
    // Idle with no stream open: GOAWAY, then closed. With streams open (a quiet long response) it is
    // looked at again one period later.
    const idle = (): void => {
      if (open === 0) session.close();
      else session.setTimeout(this.#options.idleTimeoutMs, idle);
    };
    if (this.#options.idleTimeoutMs > 0) session.setTimeout(this.#options.idleTimeoutMs, idle);
    session.once('close', () => {
      this.#sessions.delete(session);
      if (this.#sessions.size === 0) this.#emptied?.();
    });
  }
}
