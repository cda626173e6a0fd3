import type { ClientHttp2Stream, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  decodeRequestHead,
  ErrorCode,
  encodeResponseHead,
  type MuxStream,
  type RawHeaders,
  type RequestHead,
  type StreamHandler,
  type StreamResetError,
} from '@tunnel2/protocol';
import {
  backendErrorCode,
  describeBackendError,
  describeBackendReset,
  sendBackendErrorAnswer,
} from '../backend-error.js';
import type { BackendErrorAnswer } from '../backend-error-answer.js';
import { isH2Replayable } from '../backend-retry.js';
import { forwardHeaders } from '../forward-headers.js';
import type { ForwardOptions, RequestReport } from '../forward-options.js';
import { isGrpcRequest } from '../grpc-form.js';
import { expectsContinue } from '../node-http-exchange.js';
import { serverNameOf } from '../target-tls.js';
import type { H2Backend } from './h2-backend.js';
import {
  FLAG_END_STREAM,
  H2_CANCEL,
  H2_NO_ERROR,
  H2_REFUSED_STREAM,
  h2RequestHeaders,
  isStreamError,
  resetCodeOfRst,
  responseFields,
  trailerObject,
} from './h2-fields.js';
import { type Queued, trailersMayFollow } from './queued-frames.js';
import { listenUntilClose } from './stream-listeners.js';

/** The exchange's options with the HTTP/2 backend it forwards to. */
export type H2ForwardOptions = ForwardOptions & { h2: H2Backend };

/**
 * One tunnelled request forwarded to an HTTP/2 backend as one stream of a pooled session; the response's
 * head, body and trailers come back as the tunnel's frames (a trailers-only answer as one final head with
 * END_STREAM). Credit for request bytes goes back only once the backend stream took them (write() true, else
 * its 'drain'); the backend stream is paused while the tunnel stream has no credit. Resets cross both ways.
 */
export class H2Exchange implements StreamHandler {
  readonly #stream: MuxStream;
  readonly #options: H2ForwardOptions;
  /** Builds the HTTP/1.1 exchange for an https:// target whose backend chose HTTP/1.1 by ALPN. */
  readonly #fallback: () => StreamHandler;
  readonly #started = performance.now();
  #head: RequestHead | undefined;
  #payload: Buffer | undefined;
  #headEnded = false;
  #grpc = false;
  /** The head as the backend gets it (forwardHeaders' output). */
  #forwarded: string[] = [];
  /** Sent a second time already (see #replayOnce). */
  #replayed = false;
  #recording = false;
  /** Frames that arrived before the backend stream existed, in order (bounded by the stream's window). */
  #queued: Queued[] | undefined = [];
  #h2: ClientHttp2Stream | undefined;
  #release: (() => void) | undefined;
  #trailers: OutgoingHttpHeaders | undefined;
  #owed = 0;
  #status = 0;
  #bytes = 0;
  #responseStarted = false;
  #responseTrailers: RawHeaders | undefined;
  #cancelled = false;
  #finished = false;
  /** The tunnel stream took the last chunk only into its queue (write() false): no onDrain since. */
  #awaitingCredit = false;
  /** The backend's response ended while #awaitingCredit: its end (trailers) goes at the next onDrain. */
  #endAfterDrain = false;
  #recorder: ExchangeRecorder | undefined;

  constructor(stream: MuxStream, options: H2ForwardOptions, fallback: () => StreamHandler) {
    this.#stream = stream;
    this.#options = options;
    this.#fallback = fallback;
    stream.handler = this;
  }

  /** Takes the request's head (as the edge sent it) and opens the backend stream for it. */
  start(head: RequestHead, payload: Buffer, endStream: boolean): void {
    this.#head = head;
    this.#payload = payload;
    this.#headEnded = endStream;
    this.#grpc = isGrpcRequest(head.headers);
    const { target, hostHeader } = this.#options;
    this.#forwarded = forwardHeaders(head.headers, target, hostHeader);
    this.#open();
  }

  /**
   * The inspector's record, begun once the request is known to stay on this path (an https:// backend that
   * chooses HTTP/1.1 is recorded by the exchange it is handed to, not twice).
   */
  #record(): void {
    if (this.#recording) return;
    this.#recording = true;
    const head = this.#head!;
    this.#recorder = this.#options.capture?.begin({
      method: head.method,
      target: head.target,
      headers: head.headers,
      encodedHead: this.#payload!,
    });
  }

  /** Opens the backend stream on a pooled session (again, for a replay). */
  #open(): void {
    const head = this.#head!;
    const forwarded = this.#forwarded;
    const { target } = this.#options;
    const servername = target.origin.startsWith('https:') ? serverNameOf(forwarded) : '';
    this.#options.h2.open(servername).then(
      (opened) => {
        if (opened === 'http/1.1') {
          this.#toHttp1();
          return;
        }
        this.#release = opened.release;
        if (this.#cancelled) {
          opened.release();
          return;
        }
        this.#record();
        const scheme = target.origin.startsWith('https:') ? 'https' : 'http';
        let h2: ClientHttp2Stream;
        try {
          h2 = opened.session.request(
            h2RequestHeaders(head.method, target.basePath + head.target, scheme, forwarded, this.#grpc),
            {
              endStream: this.#headEnded,
              waitForTrailers: !this.#headEnded && trailersMayFollow(this.#queued ?? []),
            },
          );
        } catch (err) {
          opened.release();
          // A session that went away between the pool's choice and this request (GOAWAY, closed).
          if (!this.#replayOnce(err as Error)) this.#failBeforeHead(err as Error);
          return;
        }
        this.#attach(h2);
        // Expect: 100-continue waits at the edge for the backend's word (PROTOCOL.md §3). The header is not
        // sent on (forwardHeaders drops it) and the stream is open to take the body, so the agent says 100
        // itself, as Envoy does towards HTTP/2 upstreams.
        if (!this.#headEnded && !this.#replayed && expectsContinue(head.headers) && !this.#stream.closed) {
          const interim = encodeResponseHead({ status: 100, statusMessage: '', headers: [] }, 1024);
          this.#stream.sendHeaders(interim, false);
        }
      },
      (err: Error) => {
        if (!this.#cancelled) this.#failBeforeHead(err);
      },
    );
  }

  /**
   * Sends the request once more on another session when the one it went out on was lost before any answer
   * (a backend that closed an idle connection as the request left, or that never processed the stream):
   * as backend-retry.ts's isH2Replayable() allows.
   */
  #replayOnce(error: Error | undefined, unprocessed = false): boolean {
    if (this.#replayed || this.#responseStarted || this.#cancelled || this.#stream.closed) return false;
    const request = { method: this.#head!.method, hasBody: !this.#headEnded, grpc: this.#grpc };
    if (!isH2Replayable(request, unprocessed, error !== undefined && isStreamError(error))) return false;
    this.#replayed = true;
    this.#h2 = undefined;
    this.#open();
    return true;
  }

  // ---- StreamHandler: frames from the edge ----

  onHeaders(payload: Buffer, _endStream: boolean): void {
    // The first head went to start(); a second one is the request's trailers (PROTOCOL.md, request trailers).
    if (this.#queued !== undefined) {
      this.#queued.push({ trailers: payload });
      return;
    }
    this.#takeTrailers(payload);
  }

  onData(chunk: Buffer): void {
    if (this.#queued !== undefined) {
      this.#queued.push({ data: chunk });
      return;
    }
    this.#recorder?.requestData(chunk);
    this.#writeBody(chunk);
  }

  onEnd(): void {
    if (this.#queued !== undefined) {
      this.#queued.push({ end: true });
      return;
    }
    this.#endBody();
  }

  onReset(error: StreamResetError): void {
    const cancelled = error.protocolCode === ErrorCode.CANCEL;
    this.#report(
      cancelled ? 'client went away' : error.message,
      cancelled ? 'client_went_away' : 'stream_reset',
    );
    this.#cancelled = true;
    this.#queued = undefined;
    // Whatever the client's reason, the backend hears CANCEL: it is told to stop, not that it failed.
    if (this.#h2 !== undefined && !this.#h2.closed) this.#h2.close(H2_CANCEL);
  }

  onDrain(): void {
    this.#awaitingCredit = false;
    if (this.#endAfterDrain) {
      this.#endAfterDrain = false;
      this.#onResponseEnd();
      return;
    }
    if (this.#h2?.isPaused()) this.#h2.resume();
  }

  // ---- the backend stream ----

  #attach(h2: ClientHttp2Stream): void {
    this.#h2 = h2;
    const queued = this.#queued ?? [];
    this.#queued = undefined;
    // Credit owed for bytes the backend stream buffered goes back when they are taken: at 'drain', or at
    // 'finish' (node emits no 'drain' once end() was called, so the body's last bytes would stay owed,
    // holding the tunnel stream open and their share of the session's window for good), or at 'close'.
    const pay = (): void => {
      if (this.#owed === 0 || this.#stream.closed) return;
      const owed = this.#owed;
      this.#owed = 0;
      this.#stream.consume(owed);
    };
    // Taken off the stream again as it closes (stream-listeners.ts says why).
    const on = listenUntilClose(h2);
    on('drain', pay);
    on('finish', pay);
    on('wantTrailers', () => {
      // A stream cancelled meanwhile (its close() ends the writable side first) has nothing to send.
      if (h2.closed || h2.destroyed) return;
      try {
        h2.sendTrailers(this.#trailers ?? {});
      } catch (err) {
        // Trailer fields node:http2 will not send (a single-value field twice, a name that is no token):
        // the client's request is malformed. It costs this stream, never the agent (a throw here is
        // uncaught).
        this.#refuseRequest(`request trailers refused: ${(err as Error).message}`);
      }
    });
    on('headers', (headers, _flags, raw?: string[]) => this.#onInterim(headers, raw));
    on('response', (headers, flags, raw?: string[]) => this.#onResponse(headers, flags, raw));
    on('data', (chunk: Buffer) => {
      this.#bytes += chunk.length;
      this.#recorder?.responseData(chunk);
      if (!this.#stream.closed && !this.#stream.write(chunk)) {
        this.#awaitingCredit = true;
        h2.pause();
      }
    });
    on('trailers', (headers, _flags, raw?: string[]) => {
      this.#responseTrailers = responseFields(raw, headers);
    });
    // node:http2 also ends the readable side of a stream the backend reset with CANCEL (without an 'error'):
    // only an end with no reset code is the response's END_STREAM; the rest is read on 'close'.
    on('end', () => {
      if ((h2.rstCode ?? H2_NO_ERROR) === H2_NO_ERROR) this.#onResponseEnd();
    });
    let failure: Error | undefined;
    // A stream error (the backend's RST_STREAM, a lost session) is read on 'close', with the code.
    on('error', (err) => {
      failure = err;
    });
    const session = h2.session;
    on('close', () => {
      pay();
      this.#release?.();
      // A stream closed because its whole session went (the backend closed the connection, or its GOAWAY
      // left this stream unprocessed) carries a CANCEL code of node's own: that is a lost connection, not
      // the backend resetting this one stream.
      // REFUSED_STREAM stays itself even then: nghttp2 closes so the streams a GOAWAY left unprocessed.
      const lost = session === undefined || session.destroyed || session.closed;
      const rstCode = h2.rstCode ?? H2_NO_ERROR;
      this.#onClose(lost && rstCode !== H2_REFUSED_STREAM ? H2_NO_ERROR : rstCode, failure);
    });
    for (const frame of queued) {
      if ('data' in frame) this.onData(frame.data);
      else if ('trailers' in frame) this.#takeTrailers(frame.trailers);
      else this.#endBody();
    }
  }

  #writeBody(chunk: Buffer): void {
    const h2 = this.#h2;
    if (h2 === undefined || h2.closed || h2.destroyed || this.#headEnded) {
      this.#stream.consume(chunk.length);
      return;
    }
    if (h2.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  #endBody(): void {
    if (this.#headEnded) return;
    const h2 = this.#h2;
    if (h2 !== undefined && !h2.closed && !h2.destroyed) h2.end();
  }

  /** The client's request cannot be sent on: its stream is reset and the backend's cancelled. */
  #refuseRequest(reason: string): void {
    this.#report(reason, 'request_refused');
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    if (this.#h2 !== undefined && !this.#h2.closed) this.#h2.close(H2_CANCEL);
  }

  #takeTrailers(payload: Buffer): void {
    try {
      this.#trailers = trailerObject(decodeRequestHead(payload).headers);
    } catch {
      // A malformed trailer head carries nothing the backend could use; the body still ends.
    }
  }

  #onInterim(headers: IncomingHttpHeaders, raw: string[] | undefined): void {
    const status = Number(headers[':status']);
    // 100 answered the edge's own Expect handling; a second one means nothing to the client.
    if (!(status > 100 && status < 200) || this.#stream.closed) return;
    let head: Buffer;
    try {
      head = encodeResponseHead(
        { status, statusMessage: '', headers: responseFields(raw, headers) },
        this.#options.maxHeadSize,
      );
    } catch {
      // An interim head larger than a tunnel frame: it only advises, so it is dropped and the final answer
      // still goes (a throw here would be uncaught).
      return;
    }
    this.#stream.sendHeaders(head, false);
  }

  #onResponse(headers: IncomingHttpHeaders, flags: number, raw: string[] | undefined): void {
    if (this.#stream.closed) return;
    const status = Number(headers[':status']);
    const fields = responseFields(raw, headers);
    let head: Buffer;
    try {
      head = encodeResponseHead({ status, statusMessage: '', headers: fields }, this.#options.maxHeadSize);
    } catch (err) {
      this.#h2?.close(H2_CANCEL);
      this.#failBeforeHead(err as Error);
      return;
    }
    this.#status = status;
    this.#responseStarted = true;
    this.#recorder?.responseHead(status, fields, head);
    // A trailers-only answer (gRPC's errors): one final head with END_STREAM, as the backend sent it.
    const only = (flags & FLAG_END_STREAM) !== 0;
    this.#stream.sendHeaders(head, only);
  }

  #onResponseEnd(): void {
    if (!this.#responseStarted) return;
    // node:http2 ends a paused stream once its buffer is empty: the body's last bytes may still wait in the
    // tunnel stream for the client's credit, and trailers (END_STREAM) cannot go before them.
    if (this.#awaitingCredit && !this.#stream.closed) {
      this.#endAfterDrain = true;
      return;
    }
    // A trailers-only answer already ended the tunnel stream with its head (and the stream may be closed by
    // now, the request side having ended too): the exchange is complete all the same.
    if (!this.#stream.localEnded && !this.#stream.closed) {
      const trailers = this.#responseTrailers;
      if (trailers !== undefined && trailers.length > 0) {
        let head: Buffer;
        try {
          head = encodeResponseHead(
            { status: 200, statusMessage: '', headers: trailers },
            this.#options.maxHeadSize,
          );
        } catch (err) {
          // Trailers larger than a tunnel frame: the body went, so the client must see the answer cut
          // rather than end as if complete (a throw here would be uncaught).
          this.#stream.reset(ErrorCode.BACKEND_ERROR);
          this.#report(
            `backend sent trailers the tunnel cannot carry: ${(err as Error).message}`,
            'invalid_trailers',
          );
          return;
        }
        this.#stream.sendHeaders(head, true);
      } else {
        this.#stream.end();
      }
    }
    this.#report(undefined);
  }

  #onClose(rstCode: number, failure: Error | undefined): void {
    // The response ended complete; its end waits for the client's credit (#onResponseEnd).
    if (this.#finished || this.#endAfterDrain) return;
    if (this.#stream.closed) {
      this.#report(
        failure?.message ?? 'stream closed',
        failure ? backendErrorCode(failure) : 'stream_closed',
      );
      return;
    }
    // REFUSED_STREAM (or a stream beyond the backend's GOAWAY) was never processed (RFC 9113 §8.7): a
    // bodiless request goes again whatever its method; any other travels on as REFUSED_STREAM, which HTTP/2
    // and gRPC clients retry themselves.
    if (rstCode === H2_REFUSED_STREAM && !this.#responseStarted && this.#replayOnce(failure, true)) return;
    if (rstCode !== H2_NO_ERROR && (failure === undefined || isStreamError(failure))) {
      if (!this.#responseStarted && rstCode !== H2_CANCEL && rstCode !== H2_REFUSED_STREAM) {
        this.#answerBeforeHead(describeBackendReset(rstCode, this.#options.target.host));
        return;
      }
      // The backend reset the stream: the client sees the same kind of reset (mapping item 4).
      this.#stream.reset(resetCodeOfRst(rstCode));
      this.#report(`backend reset the stream (HTTP/2 code ${rstCode})`, 'backend_reset');
      return;
    }
    if (!this.#responseStarted) {
      const error = failure ?? Object.assign(new Error('stream closed'), { code: 'ECONNRESET' });
      if (!this.#replayOnce(error)) this.#failBeforeHead(error);
      return;
    }
    // Part of the body is already on its way: the client must see the response aborted.
    this.#stream.reset(ErrorCode.BACKEND_ERROR);
    const code = failure ? backendErrorCode(failure) : 'ECONNRESET';
    this.#report(`backend failed mid-response: ${code}`, code);
  }

  /** No usable head from the backend: the agent's own answer (502 page, or the gRPC form for a call). */
  #failBeforeHead(error: Error): void {
    this.#answerBeforeHead(describeBackendError(error, this.#options.target.host, false));
  }

  #answerBeforeHead(described: BackendErrorAnswer): void {
    // No backend stream will take the request body: what was queued for one is consumed now (what still
    // comes is, by #writeBody without a stream), or the tunnel stream would wait for that credit and stay
    // open, holding a graceful close for its whole grace.
    const queued = this.#queued ?? [];
    this.#queued = undefined;
    for (const frame of queued) if ('data' in frame) this.#stream.consume(frame.data.length);
    if (this.#finished || this.#stream.closed) return;
    this.#record();
    const head = this.#head!;
    this.#status = this.#grpc ? 200 : described.status;
    sendBackendErrorAnswer(this.#stream, described, this.#options.maxHeadSize, this.#recorder, {
      method: head.method,
      headers: head.headers,
      target: this.#options.target,
    });
    this.#report(described.message, described.code);
  }

  /** ALPN chose HTTP/1.1: the undici exchange takes the stream, with every frame received so far. */
  #toHttp1(): void {
    if (this.#cancelled) return;
    const queued = this.#queued ?? [];
    this.#queued = undefined;
    this.#finished = true;
    const handler = this.#fallback();
    // The head's own END_STREAM came as an onEnd, queued with the rest.
    handler.onHeaders(this.#payload!, this.#headEnded);
    for (const frame of queued) {
      if ('data' in frame) handler.onData(frame.data);
      else if ('trailers' in frame) handler.onHeaders(frame.trailers, true);
      else handler.onEnd();
    }
  }

  #report(error: string | undefined, code = 'exchange_failed'): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#recorder?.finish(error === undefined ? undefined : { code, message: error });
    const head = this.#head;
    const report: RequestReport = {
      method: head?.method ?? 'GET',
      path: head?.target ?? '/',
      status: this.#status,
      durationMs: Math.round((performance.now() - this.#started) * 100) / 100,
      bytes: this.#bytes,
    };
    if (error !== undefined) report.error = error;
    this.#options.onReport(report);
  }
}
