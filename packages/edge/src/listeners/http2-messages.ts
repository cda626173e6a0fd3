import type { Http2Session, IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Duplex, ReadableOptions } from 'node:stream';

// Node's HTTP/2 compatibility request and response, shaped as the shared path reads and writes a public
// message (../exchange/public-message.ts): the HTTP/1.1 path passes Node's own objects, these are the
// HTTP/2 ingress's. Not an `import` of values: the edge loads node:http2 only where it is used.
const { Http2ServerRequest, Http2ServerResponse, constants } = process.getBuiltinModule('node:http2');

/** Fields HTTP/2 forbids (RFC 9113 §8.2.2): Node's http2 throws on them, so they are dropped first. */
const connectionSpecific: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'host',
  'http2-settings',
]);

/**
 * An HTTP/2 request as the tunnel carries it (PROTOCOL.md, HTTP/2): `rawHeaders` holds the regular fields
 * in received order with `host` first from `:authority` (unless the client sent a `host`), no pseudo-
 * header, and Cookie crumbs joined into one field; `headers.host` is set the same way, so routing by host reads it as on HTTP/1.1.
 */
export class EdgeHttp2Request extends Http2ServerRequest {
  constructor(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    options: ReadableOptions,
    rawHeaders: readonly string[],
  ) {
    super(stream, headers, options, rawHeaders);
    // Node keeps the array it was given; it is rewritten in place, once, to the tunnel's form.
    const raw = this.rawHeaders;
    let write = 0;
    let host = false;
    // HTTP/2 may split Cookie into crumbs, one field each; HTTP/1.1 must see one field (RFC 9113 §8.2.3).
    let cookie = -1;
    for (let read = 0; read < raw.length; read += 2) {
      const name = raw[read]!;
      if (name.charCodeAt(0) === 58 /* ':' */) continue;
      if (name === 'host') host = true;
      else if (name === 'cookie') {
        if (cookie >= 0) {
          raw[cookie + 1] = `${raw[cookie + 1]}; ${raw[read + 1]}`;
          continue;
        }
        cookie = write;
      }
      raw[write] = name;
      raw[write + 1] = raw[read + 1]!;
      write += 2;
    }
    raw.length = write;
    const authority = headers[':authority'];
    if (!host && typeof authority === 'string') {
      raw.unshift('host', authority);
      headers.host = authority;
    }
  }

  /** Whether DATA follows the head: HTTP/2 needs no Content-Length or coding to carry a body. */
  get bodyFollows(): boolean {
    return !this.stream.endAfterHeaders;
  }
}

// The connection's own socket rather than Node's proxy of it: the edge reads its peer address and whether it
// is TLS (`'encrypted' in socket`, for X-Forwarded-Proto), and its refusals are counted by socket; it
// never writes to it. The proxy once the stream has lost its session.
// (Node's `session.socket` is a proxy too, on which `'encrypted' in` is always true.)
const proxiedSocket = Object.getOwnPropertyDescriptor(Http2ServerRequest.prototype, 'socket')?.get;
Object.defineProperty(EdgeHttp2Request.prototype, 'socket', {
  get(this: EdgeHttp2Request) {
    const session = this.stream.session;
    return (session === undefined ? undefined : sessionSockets.get(session)) ?? proxiedSocket?.call(this);
  },
});

/** Each HTTP/2 connection's socket, by its session (http2-server.ts records it as the session starts). */
export const sessionSockets = new WeakMap<Http2Session, Duplex>();

/** Body bytes a response holds back with its head until the end of the tick (a typical answer's whole body). */
const HELD_WITH_HEAD = 64 * 1024;

/** Whether a response may have DATA frames: not to HEAD, not a 204 or 304 (RFC 9110 §6.4.1). */
function mayCarryBody(status: number, method: string | undefined): boolean {
  return method !== 'HEAD' && status !== 204 && status !== 304;
}

/** Pairs or a flat list of fields, minus those HTTP/2 forbids, as the object Node's http2 takes. */
function h2Fields(fields: readonly string[] | OutgoingHttpHeaders | undefined): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  if (fields === undefined) return out;
  if (!Array.isArray(fields)) {
    for (const [name, value] of Object.entries(fields)) {
      if (!connectionSpecific.has(name.toLowerCase())) out[name.toLowerCase()] = value;
    }
    return out;
  }
  for (let i = 0; i < fields.length; i += 2) {
    const name = (fields[i] as string).toLowerCase();
    if (connectionSpecific.has(name) || name.charCodeAt(0) === 58) continue;
    const value = fields[i + 1] as string;
    const existing = out[name];
    // Repeated fields stay separate fields (Set-Cookie must), never joined.
    out[name] =
      existing === undefined
        ? value
        : Array.isArray(existing)
          ? [...existing, value]
          : [String(existing), value];
  }
  return out;
}

/**
 * An HTTP/2 response as the shared path writes one: no reason phrase, connection-specific fields dropped
 * rather than thrown on, trailers always possible, an abort that resets the stream rather than the
 * connection, and interim heads as HEADERS frames.
 */
export class EdgeHttp2Response extends Http2ServerResponse<EdgeHttp2Request> {
  /** HTTP/2 closes no connection for one response: the stream ends alone. Kept for the shared shape. */
  shouldKeepAlive = true;
  /** Trailers can always follow an HTTP/2 body. */
  readonly chunkedEncoding = true;

  // One signature covering Node's two overloads: the reason phrase HTTP/2 does not have is dropped here
  // (Node would warn on it), and so are the fields it forbids.
  override writeHead(
    status: number,
    messageOrFields?: string | OutgoingHttpHeaders | readonly string[],
    fields?: OutgoingHttpHeaders | readonly string[],
  ): this {
    const given =
      typeof messageOrFields === 'string' || messageOrFields === undefined ? fields : messageOrFields;
    if (this.stream.headersSent || this.#pendingHead !== undefined)
      return super.writeHead(status, h2Fields(given));
    // Node's compatibility layer sends HEADERS at writeHead, and an end() right after it then sends an empty
    // DATA frame with END_STREAM. The head waits for the end of this tick instead (as HTTP/1.1's head waits
    // for the first write): a response that ends in the same tick with neither body nor trailers (gRPC's
    // trailers-only answer, the gRPC form of the edge's and the agent's errors) leaves as one HEADERS frame
    // with END_STREAM, the only place gRPC clients read a grpc-status from a head.
    this.statusCode = status;
    this.#pendingHead = { status, fields: h2Fields(given) };
    process.nextTick(() => this.#sendHead());
    return this;
  }

  /** A final head given to writeHead and not sent yet. */
  #pendingHead: { status: number; fields: OutgoingHttpHeaders } | undefined;
  /** Body written in the head's tick, held with it (at most HELD_WITH_HEAD bytes). */
  #pendingBody: Uint8Array[] = [];
  #pendingBytes = 0;
  #hasTrailers = false;

  #sendHead(): void {
    const head = this.#pendingHead;
    if (head === undefined) return;
    this.#pendingHead = undefined;
    super.writeHead(head.status, head.fields);
    this.#flushBody();
  }

  /** Writes the body held with the head (the head has been sent). */
  #flushBody(): void {
    if (this.#pendingBytes === 0) return;
    const chunks = this.#pendingBody;
    this.#pendingBody = [];
    this.#pendingBytes = 0;
    const write = super.write as (chunk: Uint8Array) => boolean;
    // Within the bound the caller was told `true` for; what the stream's buffer says now is said by 'drain'.
    for (const chunk of chunks) write.call(this, chunk);
  }

  override write(
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | ((err: Error) => void),
    callback?: (err: Error) => void,
  ): boolean {
    // The first bytes of a body wait with the head for the end of the tick: if the response ends in it
    // too (most do), all of it leaves in one write (see end()).
    if (
      this.#pendingHead !== undefined &&
      typeof chunk !== 'string' &&
      encoding === undefined &&
      callback === undefined &&
      this.#pendingBytes + chunk.length <= HELD_WITH_HEAD
    ) {
      this.#pendingBody.push(chunk);
      this.#pendingBytes += chunk.length;
      return true;
    }
    this.#sendHead();
    const write = super.write as (...args: unknown[]) => boolean;
    return write.call(this, chunk, encoding, callback);
  }

  override end(
    chunk?: string | Uint8Array | (() => void),
    encoding?: BufferEncoding | (() => void),
    callback?: () => void,
  ): this {
    const head = this.#pendingHead;
    const stream = this.stream;
    if (head !== undefined && !this.#hasTrailers && !stream.destroyed && !stream.closed) {
      const bodyless =
        this.#pendingBytes === 0 &&
        (chunk === undefined || typeof chunk === 'function' || chunk.length === 0);
      const fields = { ...this.getHeaders(), ...head.fields, ':status': head.status };
      if (bodyless) {
        this.#pendingHead = undefined;
        stream.respond(fields, { endStream: true });
      } else if (mayCarryBody(head.status, this.req.method)) {
        // No trailers can follow any more: the head is sent without the compatibility layer's wait for
        // them, so the last DATA frame carries END_STREAM and head, body and end leave in one write (its
        // wait costs an empty DATA frame, one loop turn and one more write per response).
        this.#pendingHead = undefined;
        stream.respond(fields, { waitForTrailers: false });
        this.#flushBody();
      } else this.#sendHead();
    } else this.#sendHead();
    const end = super.end as (...args: unknown[]) => this;
    return end.call(this, chunk, encoding, callback);
  }

  /** Trailer fields as pairs (the exchange's form) or an object. */
  override addTrailers(trailers: [string, string][] | OutgoingHttpHeaders): void {
    const fields = h2Fields(Array.isArray(trailers) ? trailers.flat() : trailers);
    if (Object.keys(fields).length > 0) this.#hasTrailers = true;
    super.addTrailers(fields);
  }

  /** Sends a head writeHead holds back (until the end of the tick) now, with any body held with it. */
  flushHeaders(): void {
    this.#sendHead();
  }

  /** Ends the response as aborted: RST_STREAM once what was written has been sent. */
  abortStream(code: number = constants.NGHTTP2_INTERNAL_ERROR): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    this.#sendHead();
    stream.close(code);
  }

  /** A head that ends the stream (HEADERS with END_STREAM): a gRPC trailers-only answer must be one frame. */
  endWithHead(status: number, fields: string[]): void {
    const stream = this.stream;
    if (stream.destroyed || stream.headersSent) return;
    this.statusCode = status;
    stream.respond({ ...h2Fields(fields), ':status': status }, { endStream: true });
    // The compatibility layer's own state: ended, so 'close' reads as a finished response.
    this.end();
  }

  /** An interim head (102, a 1xx other than 100 and 103) as a HEADERS frame before the final one. */
  sendInterim(status: number, fields: string[]): void {
    const stream = this.stream;
    if (stream.destroyed || stream.headersSent) return;
    stream.additionalHeaders({ ...h2Fields(fields), ':status': status });
  }
}

// The stream's state, not the compatibility layer's own Writable state (which Node never destroys).
Object.defineProperty(EdgeHttp2Response.prototype, 'destroyed', {
  get(this: EdgeHttp2Response): boolean {
    return this.stream.destroyed;
  },
});
// Node reports a stream the client reset as finished; the exchange must see it as a response cut short
// (its tunnel stream is then reset, and the backend request cancelled), as HTTP/1.1's closed socket is.
Object.defineProperty(EdgeHttp2Response.prototype, 'writableFinished', {
  get(this: EdgeHttp2Response): boolean {
    const stream = this.stream;
    return this.writableEnded && stream.writableFinished && (stream.rstCode ?? 0) === 0;
  },
});
