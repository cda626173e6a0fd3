import type { IncomingHttpHeaders } from 'node:http';
import type { Http2Session, OutgoingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Readable } from 'node:stream';
import type { PublicMessage, PublicResponse } from '../exchange/public-message.js';
import { sameAuthority } from './http2-authority.js';
import { h2Fields } from './http2-fields.js';

// The HTTP/2 ingress's request and response over Node's raw stream API (ServerHttp2Stream: respond(),
// additionalHeaders, sendTrailers), shaped as the shared path reads and writes a public message
// (../exchange/public-message.ts). Not Node's compatibility layer (Http2ServerRequest/Response): it built
// two stream objects per request around the stream that is already one, relayed every event, and its
// write path created an ERR_STREAM_DESTROYED (a stack trace) for most responses once the stream had closed.
// Not an `import` of values: the edge loads node:http2 only where it is used.
const { constants } = process.getBuiltinModule('node:http2');
const { EventEmitter } = process.getBuiltinModule('node:events');

/** Each HTTP/2 connection's socket, by its session (http2-server.ts records it as the session starts). */
export const sessionSockets = new WeakMap<Http2Session, Duplex>();

/**
 * The connection's own socket rather than Node's proxy of it: the edge reads its peer address and whether it
 * is TLS (`'encrypted' in socket`, for X-Forwarded-Proto), and its refusals are counted by socket; it never
 * writes to it. (Node's `session.socket` is a proxy, on which `'encrypted' in` is always true.)
 */
function connectionSocket(stream: ServerHttp2Stream): Socket {
  const session = stream.session;
  return ((session === undefined ? undefined : sessionSockets.get(session)) ?? session?.socket) as Socket;
}

// The stream's events, relayed by one shared function each (no closure per request): `this` is the stream,
// which carries its request and response under symbols of this module (as Node's compatibility layer did).
// Not WeakMaps: an entry per stream is a hash-table insert, and ephemeron work in every scavenge.
const kRequest = Symbol('tunnel2.request');
const kResponse = Symbol('tunnel2.response');
interface EdgeStream extends ServerHttp2Stream {
  [kRequest]?: EdgeHttp2Request;
  [kResponse]?: EdgeHttp2Response;
}
function onRequestData(this: EdgeStream, chunk: Buffer): void {
  if (this[kRequest]?.push(chunk) === false) this.pause();
}
function onRequestEnd(this: EdgeStream): void {
  const req = this[kRequest];
  // Node ends the stream's readable side when the client is gone too ('aborted' first): that body did not
  // end, and must not reach the backend as a complete request.
  if (req === undefined || this.aborted) return;
  req.complete = true;
  req.pushEnd();
}
function onRequestTrailers(
  this: EdgeStream,
  _trailers: IncomingHttpHeaders,
  _flags: number,
  raw: string[],
): void {
  const req = this[kRequest];
  if (req !== undefined) req.rawTrailers = raw;
}
/** A stream's errors (a client's RST_STREAM with an error code) end that stream; 'close' follows. */
function ignore(): void {}

/**
 * An HTTP/2 request as the tunnel carries it (PROTOCOL.md, HTTP/2): `rawHeaders` holds the regular fields
 * in received order with `host` first from `:authority` (unless the client sent a `host`), no pseudo-
 * header, and Cookie crumbs joined into one field; `headers.host` is set the same way, so routing by host
 * reads it as on HTTP/1.1. Its body is the stream's DATA, paused with the stream when not read (the
 * client's window is then not handed back).
 */
export class EdgeHttp2Request extends Readable implements PublicMessage {
  readonly stream: ServerHttp2Stream;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  rawTrailers: string[] = [];
  /** Not readonly: an RFC 8441 WebSocket (CONNECT) is carried as HTTP/1.1's GET upgrade (http2-websocket.ts). */
  method: string | undefined;
  readonly url: string | undefined;
  readonly httpVersionMajor = 2;
  readonly httpVersionMinor = 0;
  readonly httpVersion = '2.0';
  readonly socket: Socket;
  /** Whether DATA follows the head: HTTP/2 needs no Content-Length or coding to carry a body. */
  readonly bodyFollows: boolean;
  /** The whole body has arrived (as IncomingMessage's `complete`). */
  complete = false;
  /** The body's end has been pushed (Readable's own flag is not public before 'end' is emitted). */
  #eof = false;
  /**
   * The `host` field, when it names another authority than `:authority`: such a request is malformed
   * (RFC 9113 §8.3.1) and answered 400 before routing (http2-websocket.ts `http2RequestProblem`).
   */
  hostConflict: string | undefined;

  constructor(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, raw: string[]) {
    super({ autoDestroy: false });
    this.stream = stream;
    this.headers = headers;
    this.method = headers[':method'] as string | undefined;
    this.url = headers[':path'] as string | undefined;
    this.socket = connectionSocket(stream);
    this.bodyFollows = !stream.endAfterHeaders;
    // Node hands over the array it decoded; it is rewritten in place, once, to the tunnel's form.
    let write = 0;
    let host: string | undefined;
    // HTTP/2 may split Cookie into crumbs, one field each; HTTP/1.1 must see one field (RFC 9113 §8.2.3).
    let cookie = -1;
    for (let read = 0; read < raw.length; read += 2) {
      const name = raw[read]!;
      if (name.charCodeAt(0) === 58 /* ':' */) continue;
      if (name === 'host') host = raw[read + 1]!;
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
    if (typeof authority === 'string') {
      if (host === undefined) {
        raw.unshift('host', authority);
        headers.host = authority;
      } else if (host !== authority && !sameAuthority(host, authority, headers[':scheme'])) {
        this.hostConflict = host;
      }
    }
    this.rawHeaders = raw;
    (stream as EdgeStream)[kRequest] = this;
    if (this.bodyFollows) {
      stream.on('data', onRequestData);
      stream.on('trailers', onRequestTrailers);
      stream.on('end', onRequestEnd);
    } else {
      // Nothing follows the head: the body is empty, and Node's own stream ends by itself.
      this.complete = true;
      this.pushEnd();
    }
  }

  /** The body ends here (once). */
  pushEnd(): void {
    if (this.#eof) return;
    this.#eof = true;
    this.push(null);
  }

  override _read(): void {
    this.stream.resume();
  }

  /**
   * The stream closed (answered, or reset by either side). A body that had not ended does not end here:
   * its 'end' would read as a complete body (the exchange would forward it as one); 'close' says it is over.
   */
  streamClosed(): void {
    this.emit('close');
  }
}

/** Body bytes a response holds back with its head until the end of the tick (a typical answer's whole body). */
const HELD_WITH_HEAD = 64 * 1024;

/**
 * A final status HTTP/2 can carry (Node's respond() allows 200-599). HTTP/1.1 passes the agent's 600-999 on
 * as given; here it must be refused now, while the caller can still answer 502 instead (the head itself
 * leaves at the end of the tick, where a refusal could only reset the stream).
 */
function assertFinalStatus(status: number): void {
  if (status < 200 || status > 599) throw new RangeError(`status ${status} has no HTTP/2 form`);
}

/** Whether a response may have DATA frames: not to HEAD, not a 204, 205 or 304 (Node ends those at once). */
function mayCarryBody(status: number, method: string | undefined): boolean {
  return method !== 'HEAD' && status !== 204 && status !== 205 && status !== 304;
}

// The stream's events for the response, one shared function each: `this` is the stream.
function onResponseDrain(this: EdgeStream): void {
  this[kResponse]?.emit('drain');
}
function onWantTrailers(this: EdgeStream): void {
  // An empty set ends the stream with an empty DATA frame (nghttp2), as Node's compatibility layer did.
  this.sendTrailers(this[kResponse]?.trailers ?? {});
}
/**
 * The response is complete (its END_STREAM queued) while the client is still sending its body: nothing
 * reads the rest, so the upload is stopped with RST_STREAM NO_ERROR (RFC 9113 §8.1, as Go and nginx do)
 * rather than read and thrown away (a 413 would otherwise bound only what is forwarded, not what is read).
 * At setImmediate: Node sends trailers at setImmediate too, queued before this, and the reset must follow.
 */
function onResponseFinish(this: EdgeStream): void {
  const req = this[kRequest];
  if (req !== undefined && !req.complete) setImmediate(stopUpload, this);
}
function stopUpload(stream: ServerHttp2Stream): void {
  if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_NO_ERROR);
}
/**
 * The stream is over: its request and response (and, through their listeners, the exchange, the tunnel
 * stream and the request's heads) are let go of here. Node keeps a closed Http2Stream reachable for a while
 * (about a second at 500 calls/s): everything hung on it lived through two scavenges and was promoted, about
 * 7 KB per call that only a full collection frees, and scavenges copying it cost the edge more than the
 * request's own handling (bench/README.md, issue #32's unary gRPC CPU per call).
 */
function onStreamClose(this: EdgeStream): void {
  const req = this[kRequest];
  const res = this[kResponse];
  this[kRequest] = undefined;
  this[kResponse] = undefined;
  req?.streamClosed();
  if (res === undefined) return;
  if (res.writableFinished) res.emit('finish');
  res.emit('close');
}

/**
 * An HTTP/2 response as the shared path writes one: no reason phrase, connection-specific fields dropped
 * rather than thrown on, trailers always possible, an abort that resets the stream rather than the
 * connection, and interim heads as HEADERS frames. The final head waits for the end of the tick in which
 * writeHead ran (as HTTP/1.1's head waits for the first write), with up to HELD_WITH_HEAD bytes of body:
 * a response that ends in that tick leaves as HEADERS + DATA with END_STREAM (or HEADERS with END_STREAM
 * alone: gRPC's trailers-only answer, the only place gRPC clients read a grpc-status from a head).
 */
export class EdgeHttp2Response extends EventEmitter implements PublicResponse {
  readonly req: EdgeHttp2Request;
  readonly stream: ServerHttp2Stream;
  statusCode = 200;
  /** HTTP/2 has no reason phrase; kept for the shared shape. */
  statusMessage = '';
  /** HTTP/2 closes no connection for one response: the stream ends alone. Kept for the shared shape. */
  shouldKeepAlive = true;
  /** Trailers can always follow an HTTP/2 body. */
  readonly chunkedEncoding = true;
  /** Trailer fields given so far, sent when the body has ended. */
  trailers: OutgoingHttpHeaders | undefined;
  /** Fields set one by one (setHeader), merged under the head's own. */
  #headers: OutgoingHttpHeaders | undefined;
  /** A final head given to writeHead and not sent yet. */
  #pendingHead: OutgoingHttpHeaders | undefined;
  /** The final head, once given (getHeader reads it: the access log names an edge error by its field). */
  #head: OutgoingHttpHeaders | undefined;
  /** Body written in the head's tick, held with it (at most HELD_WITH_HEAD bytes). */
  #pendingBody: Buffer[] = [];
  #pendingBytes = 0;
  #ended = false;

  constructor(req: EdgeHttp2Request) {
    super();
    this.req = req;
    const stream = req.stream;
    this.stream = stream;
    (stream as EdgeStream)[kResponse] = this;
    stream.on('error', ignore);
    stream.on('drain', onResponseDrain);
    stream.on('wantTrailers', onWantTrailers);
    stream.on('finish', onResponseFinish);
    stream.on('close', onStreamClose);
  }

  get socket(): Socket {
    return this.req.socket;
  }

  get headersSent(): boolean {
    return this.#pendingHead !== undefined || this.stream.headersSent;
  }

  get destroyed(): boolean {
    return this.stream.destroyed;
  }

  get writableEnded(): boolean {
    return this.#ended;
  }

  /**
   * Ended and sent, and the stream closed without a reset: Node reports a stream the client reset as
   * finished; the exchange must see it as a response cut short (its tunnel stream is then reset, and the
   * backend request cancelled), as HTTP/1.1's closed socket is.
   */
  get writableFinished(): boolean {
    const stream = this.stream;
    return this.#ended && stream.writableFinished && (stream.rstCode ?? 0) === 0;
  }

  setHeader(name: string, value: string | number | readonly string[]): this {
    this.#headers ??= {};
    this.#headers[name.toLowerCase()] = value as string | number | string[];
    return this;
  }

  getHeader(name: string): string | number | string[] | undefined {
    return (this.#head ?? this.#headers)?.[name.toLowerCase()];
  }

  removeHeader(name: string): void {
    if (this.#headers !== undefined) delete this.#headers[name.toLowerCase()];
  }

  // One signature covering Node's two overloads: the reason phrase HTTP/2 does not have is dropped here,
  // and so are the fields it forbids.
  writeHead(
    status: number,
    messageOrFields?: string | OutgoingHttpHeaders | readonly string[],
    fields?: OutgoingHttpHeaders | readonly string[],
  ): this {
    if (this.headersSent || this.stream.destroyed) return this;
    assertFinalStatus(status);
    const given =
      typeof messageOrFields === 'string' || messageOrFields === undefined ? fields : messageOrFields;
    this.statusCode = status;
    const head = h2Fields(given, this.#headers === undefined ? {} : { ...this.#headers });
    head[':status'] = status;
    this.#pendingHead = head;
    this.#head = head;
    process.nextTick(sendHeadLater, this);
    return this;
  }

  /** Sends the pending head: DATA may follow it (and trailers, which end the stream) unless `endStream`. */
  #respond(endStream: boolean, waitForTrailers: boolean): void {
    const head = this.#pendingHead;
    if (head === undefined) return;
    this.#pendingHead = undefined;
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    const bodyless = endStream || !mayCarryBody(this.statusCode, this.req.method);
    try {
      stream.respond(head, { endStream: bodyless, waitForTrailers: waitForTrailers && !bodyless });
    } catch {
      // The exchange checked the head (response-head-check.ts); a field Node still refuses ends this stream.
      stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (bodyless) {
      this.#pendingBody = [];
      this.#pendingBytes = 0;
      return;
    }
    if (this.#pendingBytes === 0) return;
    const chunks = this.#pendingBody;
    this.#pendingBody = [];
    this.#pendingBytes = 0;
    // Within the bound the caller was told `true` for; what the stream's buffer says now is said by 'drain'.
    for (const chunk of chunks) stream.write(chunk);
  }

  /** Sends a head writeHead holds back (until the end of the tick) now, with any body held with it. */
  flushHeaders(): void {
    this.#respond(false, true);
  }

  write(chunk: Buffer | string): boolean {
    const body = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (this.#ended) return false;
    // The first bytes of a body wait with the head for the end of the tick: if the response ends in it
    // too (most do), all of it leaves in one write (see end()).
    if (this.#pendingHead !== undefined && this.#pendingBytes + body.length <= HELD_WITH_HEAD) {
      this.#pendingBody.push(body);
      this.#pendingBytes += body.length;
      return true;
    }
    const stream = this.stream;
    if (!stream.headersSent) {
      if (this.#pendingHead === undefined) this.writeHead(this.statusCode);
      this.#respond(false, true);
    }
    // A stream already ended by its head (HEAD, 204, 304) or gone takes no body: it is dropped.
    if (stream.destroyed || stream.writableEnded) return true;
    return stream.write(body);
  }

  end(chunk?: Buffer | string): this {
    if (this.#ended) return this;
    const stream = this.stream;
    if (chunk !== undefined && chunk.length > 0) this.write(chunk);
    this.#ended = true;
    if (!stream.headersSent && this.#pendingHead === undefined) this.writeHead(this.statusCode);
    if (this.#pendingHead !== undefined) {
      // No trailers can follow if none are known now: the last DATA frame then carries END_STREAM and head,
      // body and end leave in one write (waiting for trailers costs an empty DATA frame per response).
      const trailers = this.trailers !== undefined && Object.keys(this.trailers).length > 0;
      this.#respond(this.#pendingBytes === 0 && !trailers, trailers);
    }
    if (!stream.destroyed && !stream.writableEnded) stream.end();
    return this;
  }

  /** Trailer fields as pairs (the exchange's form) or an object; sent once the body has ended. */
  addTrailers(trailers: [string, string][] | OutgoingHttpHeaders): void {
    this.trailers = h2Fields(Array.isArray(trailers) ? trailers.flat() : trailers, this.trailers);
  }

  writeContinue(): void {
    const stream = this.stream;
    if (stream.headersSent || stream.destroyed) return;
    stream.additionalHeaders({ ':status': 100 });
  }

  writeEarlyHints(hints: Record<string, string | string[]>): void {
    const fields: string[] = [];
    for (const [name, value] of Object.entries(hints)) {
      for (const one of Array.isArray(value) ? value : [value]) fields.push(name, one);
    }
    this.sendInterim(103, fields);
  }

  destroy(): void {
    if (!this.stream.destroyed) this.stream.destroy();
  }

  /** Ends the response as aborted: RST_STREAM once what was written has been sent. */
  abortStream(code: number = constants.NGHTTP2_INTERNAL_ERROR): void {
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    this.#respond(false, true);
    stream.close(code);
  }

  /** A head that ends the stream (HEADERS with END_STREAM): a gRPC trailers-only answer must be one frame. */
  endWithHead(status: number, fields: string[]): void {
    const stream = this.stream;
    if (stream.destroyed || this.headersSent) return;
    assertFinalStatus(status);
    this.statusCode = status;
    const head = h2Fields(fields, this.#headers === undefined ? {} : { ...this.#headers });
    head[':status'] = status;
    this.#pendingHead = head;
    this.#head = head;
    this.#ended = true;
    this.#respond(true, false);
  }

  /**
   * The stream goes to Node's compatibility objects (the edge's own pages, http2-compat.ts): this request
   * and response stop relaying its events, but for 'close' (the metrics and the access log listen here).
   */
  handOver(): void {
    const stream = this.stream;
    stream.off('data', onRequestData);
    stream.off('trailers', onRequestTrailers);
    stream.off('end', onRequestEnd);
    stream.off('drain', onResponseDrain);
    stream.off('wantTrailers', onWantTrailers);
    stream.off('finish', onResponseFinish);
  }

  /**
   * What the compatibility objects answered, once sent: this response then reads as that one (its status
   * and end for the metrics, its head for the access log's `edgeError`).
   */
  handedOverFinished(status: number, head: OutgoingHttpHeaders): void {
    this.statusCode = status;
    this.#head = head;
    this.#ended = true;
  }

  /** An interim head (1xx) as a HEADERS frame before the final one. */
  sendInterim(status: number, fields: string[]): void {
    const stream = this.stream;
    if (stream.destroyed || this.headersSent) return;
    const head = h2Fields(fields);
    head[':status'] = status;
    try {
      stream.additionalHeaders(head);
    } catch {
      // An interim head is advisory (RFC 9110 §15.2): one Node refuses is dropped, the final head follows.
    }
  }
}

/** writeHead's deferred send, at the end of its tick (a shared function, no closure per response). */
function sendHeadLater(res: EdgeHttp2Response): void {
  res.flushHeaders();
}
