import type { ClientHttp2Stream } from 'node:http2';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  ErrorCode,
  encodeResponseHead,
  type MuxStream,
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
  H2_CANCEL,
  H2_REFUSED_STREAM,
  h2RequestHeaders,
  isStreamError,
  resetCodeOfRst,
} from './h2-fields.js';
import { H2RequestBody } from './h2-request-body.js';
import { H2ResponseRelay } from './h2-response-relay.js';
import { closeCodeOf, streamEndOf } from './h2-stream-end.js';
import { listenUntilClose } from './stream-listeners.js';

/** The exchange's options with the HTTP/2 backend it forwards to. */
export type H2ForwardOptions = ForwardOptions & { h2: H2Backend };

/**
 * One tunnelled request forwarded to an HTTP/2 backend as one stream of a pooled session: this class opens
 * the stream (again, for a replay), and decides what a stream that closed early means; the request's body
 * and trailers go through H2RequestBody, the response's head, body and trailers come back through
 * H2ResponseRelay. Resets cross both ways.
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
  readonly #body: H2RequestBody;
  readonly #response: H2ResponseRelay;
  #h2: ClientHttp2Stream | undefined;
  #release: (() => void) | undefined;
  #cancelled = false;
  #finished = false;
  #recorder: ExchangeRecorder | undefined;

  constructor(stream: MuxStream, options: H2ForwardOptions, fallback: () => StreamHandler) {
    this.#stream = stream;
    this.#options = options;
    this.#fallback = fallback;
    const recorder = (): ExchangeRecorder | undefined => this.#recorder;
    this.#body = new H2RequestBody(stream, recorder, (reason) => this.#refuseRequest(reason));
    this.#response = new H2ResponseRelay(stream, options.maxHeadSize, recorder, {
      failBeforeHead: (err) => this.#failBeforeHead(err),
      report: (error, code) => this.#report(error, code),
    });
    stream.handler = this;
  }

  /** Takes the request's head (as the edge sent it) and opens the backend stream for it. */
  start(head: RequestHead, payload: Buffer, endStream: boolean): void {
    this.#head = head;
    this.#payload = payload;
    this.#headEnded = endStream;
    this.#body.headEnded = endStream;
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
              waitForTrailers: !this.#headEnded && this.#body.trailersMayFollow(),
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
    if (this.#replayed || this.#response.started || this.#cancelled || this.#stream.closed) return false;
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
    this.#body.trailers(payload);
  }

  onData(chunk: Buffer): void {
    this.#body.data(chunk);
  }

  onEnd(): void {
    this.#body.end();
  }

  onReset(error: StreamResetError): void {
    const cancelled = error.protocolCode === ErrorCode.CANCEL;
    this.#report(
      cancelled ? 'client went away' : error.message,
      cancelled ? 'client_went_away' : 'stream_reset',
    );
    this.#cancelled = true;
    this.#body.takeQueued();
    // Whatever the client's reason, the backend hears CANCEL: it is told to stop, not that it failed.
    if (this.#h2 !== undefined && !this.#h2.closed) this.#h2.close(H2_CANCEL);
  }

  onDrain(): void {
    this.#response.drained();
  }

  // ---- the backend stream ----

  #attach(h2: ClientHttp2Stream): void {
    this.#h2 = h2;
    // Every listener below comes off the stream again as it closes (stream-listeners.ts says why).
    const on = listenUntilClose(h2);
    this.#response.attach(h2, on);
    let failure: Error | undefined;
    // A stream error (the backend's RST_STREAM, a lost session) is read on 'close', with the code.
    on('error', (err) => {
      failure = err;
    });
    const session = h2.session;
    on('close', () => {
      this.#body.pay();
      this.#release?.();
      this.#onClose(closeCodeOf(h2, session), failure);
    });
    // Last: the frames queued while the session was being opened are written now.
    this.#body.attach(h2, on);
  }

  /** The client's request cannot be sent on: its stream is reset and the backend's cancelled. */
  #refuseRequest(reason: string): void {
    this.#report(reason, 'request_refused');
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    if (this.#h2 !== undefined && !this.#h2.closed) this.#h2.close(H2_CANCEL);
  }

  #onClose(rstCode: number, failure: Error | undefined): void {
    // The response ended complete; its end waits for the client's credit (H2ResponseRelay).
    if (this.#finished || this.#response.endPending) return;
    if (this.#stream.closed) {
      this.#report(
        failure?.message ?? 'stream closed',
        failure ? backendErrorCode(failure) : 'stream_closed',
      );
      return;
    }
    const started = this.#response.started;
    // REFUSED_STREAM (or a stream beyond the backend's GOAWAY) was never processed (RFC 9113 §8.7): a
    // bodiless request goes again whatever its method; any other travels on as REFUSED_STREAM, which HTTP/2
    // and gRPC clients retry themselves.
    if (rstCode === H2_REFUSED_STREAM && !started && this.#replayOnce(failure, true)) return;
    switch (streamEndOf(rstCode, failure, started)) {
      case 'answer':
        this.#answerBeforeHead(describeBackendReset(rstCode, this.#options.target.host));
        return;
      case 'reset':
        // The backend reset the stream: the client sees the same kind of reset (mapping item 4).
        this.#stream.reset(resetCodeOfRst(rstCode));
        this.#report(`backend reset the stream (HTTP/2 code ${rstCode})`, 'backend_reset');
        return;
      case 'lost': {
        if (!started) {
          const error = failure ?? Object.assign(new Error('stream closed'), { code: 'ECONNRESET' });
          if (!this.#replayOnce(error)) this.#failBeforeHead(error);
          return;
        }
        // Part of the body is already on its way: the client must see the response aborted.
        this.#stream.reset(ErrorCode.BACKEND_ERROR);
        const code = failure ? backendErrorCode(failure) : 'ECONNRESET';
        this.#report(`backend failed mid-response: ${code}`, code);
      }
    }
  }

  /** No usable head from the backend: the agent's own answer (502 page, or the gRPC form for a call). */
  #failBeforeHead(error: Error): void {
    this.#answerBeforeHead(describeBackendError(error, this.#options.target.host, false));
  }

  #answerBeforeHead(described: BackendErrorAnswer): void {
    // No backend stream will take the request body: what was queued for one is consumed now (what still
    // comes is, by H2RequestBody without a stream), or the tunnel stream would wait for that credit and stay
    // open, holding a graceful close for its whole grace.
    for (const frame of this.#body.takeQueued()) if ('data' in frame) this.#stream.consume(frame.data.length);
    if (this.#finished || this.#stream.closed) return;
    this.#record();
    const head = this.#head!;
    this.#response.status = this.#grpc ? 200 : described.status;
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
    const queued = this.#body.takeQueued();
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
      status: this.#response.status,
      durationMs: Math.round((performance.now() - this.#started) * 100) / 100,
      bytes: this.#response.bytes,
    };
    if (error !== undefined) report.error = error;
    this.#options.onReport(report);
  }
}
