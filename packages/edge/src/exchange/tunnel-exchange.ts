import {
  dropHopByHop,
  ErrorCode,
  encodeRequestHead,
  type MuxStream,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { sendEdgeError } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import { BODY_BEFORE_HEAD, writeBodyChunk } from './body-chunk.js';
import { writeInformational } from './informational.js';
import type { PublicMessage, PublicResponse } from './public-message.js';
import { pairs } from './raw-http.js';
import { abortResponse } from './response-abort.js';
import { decode, ResponseFraming } from './response-framing.js';
import { fieldsAreValid } from './response-head-check.js';

/** Request trailers are bounded by the header limit upstream; this only keeps the encoder's bound finite. */
const MAX_TRAILER_HEAD = 1024 * 1024;

export interface ExchangeContext {
  name: string;
  responseTimeoutMs: number;
  /**
   * A gRPC call's own deadline (its `grpc-timeout`, in ms): it replaces the response timeout and bounds the
   * whole call: at expiry the stream is reset CANCEL and the client gets DEADLINE_EXCEEDED (the gRPC form
   * before the head, RST_STREAM CANCEL after it).
   */
  callTimeoutMs?: number | undefined;
  /** The call's grpc-timeout as the client gave it (ms), when `callTimeoutMs` is what was left of it. */
  callGivenMs?: number | undefined;
  /** A streamed body beyond this is cut off with 413 (or an aborted response once one has started). */
  maxRequestBodyBytes?: number;
  onFinish?: (exchange: TunnelExchange) => void;
  /**
   * The stream was reset before anything was written to the client (no head, no 1xx). Returns true when
   * the caller takes the request on (a node-to-node link: sent elsewhere, or answered by the caller); the
   * exchange then writes nothing. Absent, or false: the reset is described to the client as usual.
   */
  onUnanswered?: (error: StreamResetError) => boolean;
}

/**
 * One public request carried over one stream. Request bytes flow into the stream (the client socket is
 * paused while the stream has no credit); response bytes flow into the client response and their credit
 * is returned only once the response has taken them (after 'drain' when the client is slow).
 */
export class TunnelExchange implements StreamHandler {
  readonly #req: PublicMessage;
  readonly #res: PublicResponse;
  readonly #stream: MuxStream;
  readonly #context: ExchangeContext;
  #timer: NodeJS.Timeout | undefined;
  #headSent = false;
  #done = false;
  /** Response bytes written while the client's buffer was full; credited on 'drain'. */
  #owed = 0;
  /** The request body is still streaming in. */
  #requestPending = false;
  /** The response's head checks, interim count and declared length. */
  readonly #framing: ResponseFraming;

  constructor(req: PublicMessage, res: PublicResponse, stream: MuxStream, context: ExchangeContext) {
    this.#req = req;
    this.#res = res;
    this.#stream = stream;
    this.#context = context;
    this.#framing = new ResponseFraming({ method: req.method ?? 'GET', upgrade: false });
    stream.handler = this;
    this.#timer = setTimeout(this.#onTimeout, context.callTimeoutMs ?? context.responseTimeoutMs);
    res.on('close', this.#onResponseClose);
    res.on('drain', this.#onResponseDrain);
  }

  /** Sends the request body (if any) into the stream, honouring its backpressure. */
  pumpRequestBody(): void {
    const req = this.#req;
    this.#requestPending = true;
    const limit = this.#context.maxRequestBodyBytes ?? Number.POSITIVE_INFINITY;
    let received = 0;
    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) {
        this.#bodyTooLarge(limit);
        return;
      }
      if (!this.#stream.write(chunk)) req.pause();
    });
    req.on('end', () => {
      this.#requestPending = false;
      // HTTP/2 request trailers (gRPC clients send none, but HTTP/2 allows them) follow the body as a
      // second head with END_STREAM (PROTOCOL.md); HTTP/1.1's chunked trailers are not carried, as before.
      const trailers = req.httpVersionMajor === 2 ? req.rawTrailers : undefined;
      if (trailers === undefined || trailers.length === 0) this.#stream.end();
      else this.#sendRequestTrailers(trailers);
    });
  }

  /** The request's trailer head, after its body, ending the stream. */
  #sendRequestTrailers(fields: string[]): void {
    const req = this.#req;
    const trailers = encodeRequestHead(
      { method: req.method ?? 'GET', target: req.url ?? '/', headers: withoutHopByHop(fields) },
      MAX_TRAILER_HEAD,
    );
    if (this.#stream.closed) return;
    // 'end' comes only while the body flows, so nothing of it is still queued before the trailers; a head
    // larger than the agent takes in one frame ends the body without them.
    try {
      this.#stream.sendHeaders(trailers, true);
    } catch {
      this.#stream.end();
    }
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#done) return;
    if (this.#headSent) {
      // A second head after the body is the trailer section: kept apart from the header section.
      // Only a chunked response can carry them; a section with a field that is not valid (a name that is
      // not a token, a CR/LF that would smuggle a response) is dropped whole.
      const trailers = decode(payload);
      if (!trailers.ok) {
        this.#invalidHead(trailers.problem);
        return;
      }
      const fields = trailers.head.headers;
      if (fields.length > 0 && this.#res.chunkedEncoding && fieldsAreValid(fields))
        this.#res.addTrailers(pairs(fields));
      if (endStream) this.#finish();
      return;
    }
    const framed = this.#framing.head(payload, endStream);
    if (!framed.ok) {
      this.#invalidHead(framed.problem);
      return;
    }
    const { head, check } = framed;
    if (check.kind === 'interim') {
      writeInformational(this.#req, this.#res, head.status, head.statusMessage, check.headers);
      return;
    }
    // A call's deadline runs on past the head; the response timeout ends with it.
    if (this.#context.callTimeoutMs === undefined) this.#clearTimer();
    const res = this.#res;
    // The head was decoded for this exchange alone: its fields are filtered in place, not copied.
    const fields = dropHopByHop(check.headers);
    try {
      // HTTP/2: a final head that ends the stream is one HEADERS frame with END_STREAM (a gRPC trailers-only
      // answer must be), not a head followed by an empty DATA frame.
      if (endStream && res.endWithHead !== undefined) res.endWithHead(head.status, fields);
      else res.writeHead(head.status, head.statusMessage || undefined, fields);
    } catch (err) {
      // The check above should leave Node nothing to refuse; if it does, the agent's reason must not stay
      // on the response, where the 502's head would pick it up.
      this.#res.statusMessage = '';
      this.#invalidHead(`Node refused it (${(err as Error).message})`);
      return;
    }
    this.#headSent = true;
    if (endStream) this.#finish();
  }

  onData(chunk: Buffer): void {
    if (this.#done) return;
    if (!this.#headSent) {
      // Body bytes with no final head (after a 1xx, a dropped 101) would go out under an implicit 200.
      this.#invalidHead(BODY_BEFORE_HEAD);
      return;
    }
    // Past the declared length the bytes would be read as the next response on this connection (a
    // pipelined request to another tunnel): what fits is written, then the connection is aborted.
    const outcome = writeBodyChunk(this.#res, chunk, this.#framing);
    if (outcome === 'taken') this.#stream.consume(chunk.length);
    else if (outcome === 'buffered') this.#owed += chunk.length;
    else this.#abort();
  }

  onEnd(): void {
    this.#finish();
  }

  onReset(error: StreamResetError): void {
    this.#clearTimer();
    if (this.#done) return;
    this.#done = true;
    if (!this.#headSent && this.#framing.interim === 0 && this.#context.onUnanswered?.(error) === true) {
      this.#res.off('close', this.#onResponseClose);
      this.#res.off('drain', this.#onResponseDrain);
      this.#req.resume();
      this.#context.onFinish?.(this);
      return;
    }
    if (this.#headSent) {
      // The body was cut short: the client must see an aborted response, never a silently short one, but
      // it sees the head and the bytes written so far first (they may still be corked in this tick). On
      // HTTP/2 the reset's reason carries on: a cancel stays a cancel, a refusal a refusal.
      abortResponse(this.#res, h2ResetCode(error.protocolCode));
    } else {
      const [code, message] = describeReset(error.protocolCode, this.#context.name);
      sendEdgeError(this.#res, code, message, code === EdgeErrorCode.TUNNEL_BUSY ? 1 : undefined);
    }
    this.#req.resume();
    this.#context.onFinish?.(this);
  }

  onDrain(): void {
    this.#req.resume();
  }

  #finish(): void {
    if (this.#done) return;
    if (this.#headSent && this.#framing.short) {
      // Short of its declared length: ending it normally would leave the client waiting for bytes that are
      // not coming, or reading the next response as the rest of this one. It is aborted instead.
      this.#abort();
      return;
    }
    this.#done = true;
    this.#clearTimer();
    if (!this.#headSent) {
      sendEdgeError(
        this.#res,
        EdgeErrorCode.STREAM_FAILED,
        `tunnel ${this.#context.name}: agent ended without a response`,
      );
    } else {
      this.#res.end();
    }
    if (this.#requestPending) {
      // The backend answered before the body was complete (an early 413, a refused 100-continue): the rest
      // of the body has nowhere to go, so the stream is cancelled and what the client still sends is drained.
      this.#stream.reset(ErrorCode.CANCEL);
      this.#req.resume();
    }
    this.#context.onFinish?.(this);
  }

  /** The agent's head is not one a proxy may pass on: a clean 502 of the edge's own, the stream reset. */
  #invalidHead(problem: string): void {
    this.#done = true;
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    sendEdgeError(
      this.#res,
      EdgeErrorCode.STREAM_FAILED,
      `tunnel ${this.#context.name}: the backend sent an invalid response head: ${problem}`,
    );
    this.#req.resume();
    this.#context.onFinish?.(this);
  }

  /**
   * The body broke its framing (more or fewer bytes than declared, or a body where none may be): the
   * client connection is destroyed, never reused, and the stream is reset as failed.
   */
  #abort(): void {
    this.#done = true;
    this.#requestPending = false;
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    abortResponse(this.#res);
    this.#req.resume();
    this.#context.onFinish?.(this);
  }

  #bodyTooLarge(limit: number): void {
    if (this.#done) return;
    this.#done = true;
    this.#requestPending = false;
    this.#clearTimer();
    this.#stream.reset(ErrorCode.CANCEL);
    // Already streaming: the backend request is cancelled and the client hears 413 (or, if the response had
    // begun, an aborted response); the connection closes so the rest of the body is not read.
    this.#res.shouldKeepAlive = false;
    sendEdgeError(
      this.#res,
      EdgeErrorCode.BODY_TOO_LARGE,
      `request body exceeds this edge's limit of ${limit} bytes`,
    );
    this.#req.resume();
    this.#context.onFinish?.(this);
  }

  readonly #onTimeout = (): void => {
    this.#timer = undefined;
    if (this.#done) return;
    const call = this.#context.callTimeoutMs;
    if (this.#headSent) {
      if (call === undefined) return;
      // The call's deadline passed mid-answer: the backend's stream is cancelled and so is the client's (a
      // gRPC client reports DEADLINE_EXCEEDED from its own timer).
      this.#done = true;
      this.#requestPending = false;
      this.#stream.reset(ErrorCode.CANCEL);
      abortResponse(this.#res, H2_CANCEL);
      this.#req.resume();
      this.#context.onFinish?.(this);
      return;
    }
    this.#done = true;
    this.#stream.reset(ErrorCode.CANCEL);
    sendEdgeError(
      this.#res,
      EdgeErrorCode.RESPONSE_TIMEOUT,
      call === undefined
        ? `tunnel ${this.#context.name}: no response from the backend within ${this.#context.responseTimeoutMs} ms`
        : `tunnel ${this.#context.name}: the call's deadline (grpc-timeout, ${this.#context.callGivenMs ?? call} ms) passed before the backend answered`,
    );
    this.#req.resume();
    this.#context.onFinish?.(this);
  };

  readonly #onResponseDrain = (): void => {
    if (this.#owed > 0) {
      const owed = this.#owed;
      this.#owed = 0;
      this.#stream.consume(owed);
    }
  };

  /** The client connection closed: if the response was not complete, the backend request is cancelled. */
  readonly #onResponseClose = (): void => {
    this.#clearTimer();
    if (!this.#res.writableFinished && !this.#stream.closed) this.#stream.reset(ErrorCode.CANCEL);
    else if (this.#owed > 0) this.#onResponseDrain();
    if (!this.#done) {
      this.#done = true;
      this.#context.onFinish?.(this);
    }
  };

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** HTTP/2's RST_STREAM codes the edge resets a public stream with (RFC 9113 §7). */
const H2_INTERNAL_ERROR = 0x2;
const H2_REFUSED_STREAM = 0x7;
const H2_CANCEL = 0x8;

/** A tunnel RESET after the head, as the HTTP/2 client's RST_STREAM (PROTOCOL.md, resets). */
function h2ResetCode(code: number): number {
  if (code === ErrorCode.CANCEL) return H2_CANCEL;
  if (code === ErrorCode.REFUSED_STREAM) return H2_REFUSED_STREAM;
  return H2_INTERNAL_ERROR;
}

function describeReset(code: number, name: string): [EdgeErrorCode, string] {
  switch (code) {
    case ErrorCode.REFUSED_STREAM:
      return [
        EdgeErrorCode.TUNNEL_BUSY,
        `tunnel ${name}: the agent refused the request (too busy or shutting down)`,
      ];
    case ErrorCode.GOING_AWAY:
      return [EdgeErrorCode.TUNNEL_BUSY, `tunnel ${name}: the agent is shutting down`];
    case ErrorCode.SESSION_CLOSED:
      return [EdgeErrorCode.TUNNEL_OFFLINE, `tunnel ${name} is offline: its agent disconnected`];
    case ErrorCode.BACKEND_TIMEOUT:
      return [EdgeErrorCode.RESPONSE_TIMEOUT, `tunnel ${name}: the backend did not answer in time`];
    case ErrorCode.HEADERS_TOO_LARGE:
      return [EdgeErrorCode.HEADERS_TOO_LARGE, `tunnel ${name}: request headers too large for the tunnel`];
    default:
      return [EdgeErrorCode.STREAM_FAILED, `tunnel ${name}: the request failed in the tunnel`];
  }
}
