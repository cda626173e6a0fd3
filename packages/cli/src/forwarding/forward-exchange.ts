import { Readable } from 'node:stream';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  decodeRequestHead,
  ErrorCode,
  encodeResponseHead,
  GrpcStatus,
  type MuxStream,
  type RawHeaders,
  type StreamHandler,
  type StreamResetError,
} from '@tunnel2/protocol';
import type { Dispatcher } from 'undici';
import { backendErrorCode, describeBackendError, sendBackendErrorAnswer } from './backend-error.js';
import type { BackendErrorCode } from './backend-error-answer.js';
import { isReplayable, isStaleConnection } from './backend-retry.js';
import { forwardHeaders, rawHeaderStrings, responseFields } from './forward-headers.js';
import type { ForwardOptions, RequestReport } from './forward-options.js';
import { isGrpcRequest, sendGrpcErrorAnswer } from './grpc-form.js';
import { H2Exchange } from './http2/h2-exchange.js';
import { expectsContinue, isWebSocketUpgrade, NodeHttpExchange } from './node-http-exchange.js';

// The head's own module: the HTTP/2 exchange builds its head from it too.
export { forwardHeaders } from './forward-headers.js';

type DispatchController = Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseStart']>>[0];

/**
 * One tunnelled request on the agent: stream → undici request to the local target, and the response
 * back into the stream. Both directions stream; credit is returned only as bytes are taken.
 */
export class ForwardExchange implements StreamHandler, Dispatcher.DispatchHandler {
  readonly #stream: MuxStream;
  readonly #options: ForwardOptions;
  readonly #started = performance.now();
  #method = 'GET';
  /** The request's fields as the edge sent them: a backend error's page takes its form from them. */
  #requestHeaders: RawHeaders = [];
  #path = '/';
  #status = 0;
  #bytes = 0;
  #body: Readable | undefined;
  /** Request bytes pushed while the body stream was full; credited when undici reads again. */
  #owed = 0;
  #controller: DispatchController | undefined;
  #responseStarted = false;
  /** A first byte of a response arrived: the backend got the request (never replayed) and began answering. */
  #answerBegun = false;
  #finished = false;
  #requestSeen = false;
  /** The request as dispatched, kept while it may be replayed once on a fresh connection. */
  #replay: Dispatcher.DispatchOptions | undefined;
  /** Why the first attempt failed, once the request was replayed. */
  #firstFailure: Error | undefined;
  /** The inspector's record of this exchange (only while the inspector is on and not paused). */
  #recorder: ExchangeRecorder | undefined;

  constructor(stream: MuxStream, options: ForwardOptions) {
    this.#stream = stream;
    this.#options = options;
    stream.handler = this;
  }

  // ---- StreamHandler: frames from the edge ----

  onHeaders(payload: Buffer, endStream: boolean): void {
    // Request trailers (PROTOCOL.md "HTTP/2 and gRPC"): undici cannot send them to an HTTP/1.1 backend;
    // dropped, as HTTP/1.1 proxies do.
    if (this.#requestSeen) return;
    this.#requestSeen = true;
    const head = decodeRequestHead(payload);
    const h2 = this.#options.h2;
    // An HTTP/2 backend, or an https:// one whose ALPN choice is not known yet (the HTTP/2 exchange hands
    // the stream back here, as a new exchange, if it picks HTTP/1.1). WebSocket upgrades stay HTTP/1.1.
    const toH2 = h2 !== undefined && h2.protocol !== 'http/1.1';
    if (isWebSocketUpgrade(head.headers) || (!toH2 && expectsContinue(head.headers))) {
      new NodeHttpExchange(this.#stream, this.#options).start(
        head,
        forwardHeaders(head.headers, this.#options.target, this.#options.hostHeader),
        !endStream,
      );
      return;
    }
    if (toH2) {
      new H2Exchange(
        this.#stream,
        { ...this.#options, h2 },
        () => new ForwardExchange(this.#stream, this.#options),
      ).start(head, payload, endStream);
      return;
    }
    this.#method = head.method;
    this.#path = head.target;
    this.#requestHeaders = head.headers;
    if (isGrpcRequest(head.headers)) {
      this.#refuseGrpc(payload);
      return;
    }
    this.#recorder = this.#options.capture?.begin({
      method: head.method,
      target: head.target,
      headers: head.headers,
      encodedHead: payload,
    });
    if (!endStream) {
      this.#body = new Readable({
        highWaterMark: 64 * 1024,
        read: () => {
          if (this.#owed > 0) {
            const owed = this.#owed;
            this.#owed = 0;
            this.#stream.consume(owed);
          }
        },
      });
    }
    const { target } = this.#options;
    const request: Dispatcher.DispatchOptions = {
      origin: target.origin,
      method: head.method,
      path: target.basePath + head.target,
      headers: forwardHeaders(head.headers, this.#options.target, this.#options.hostHeader),
      body: this.#body ?? null,
      // The edge owns the response timeout; a body may legitimately stay idle (SSE).
      headersTimeout: 0,
      bodyTimeout: 0,
    };
    if (isReplayable(head.method, this.#body !== undefined)) this.#replay = request;
    this.#options.backend.dispatch(request, this);
  }

  onData(chunk: Buffer): void {
    this.#recorder?.requestData(chunk);
    const body = this.#body;
    if (body === undefined || body.destroyed) {
      this.#stream.consume(chunk.length);
      return;
    }
    if (body.push(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  onEnd(): void {
    this.#body?.push(null);
  }

  onReset(error: StreamResetError): void {
    // Reported first: aborting undici below calls onResponseError at once, which would report the abort's
    // own error instead of why the stream ended.
    const cancelled = error.protocolCode === ErrorCode.CANCEL;
    this.#report(
      cancelled ? 'client went away' : error.message,
      cancelled ? 'client_went_away' : 'stream_reset',
    );
    // A request still waiting for a backend connection leaves the line: nothing of it ever reaches the
    // backend. One undici has started is aborted through its controller (which also ends its connection:
    // an HTTP/1.1 request cannot be cancelled otherwise).
    if (!this.#options.backend.cancel(this) && this.#controller && !this.#controller.aborted) {
      this.#controller.abort(new Error(`request cancelled through the tunnel (${error.message})`));
    }
    // Never destroy(err): until undici starts the request nobody listens for the body's 'error', and an
    // unheard 'error' is an uncaught exception that ends the agent. Destroyed without an error, the body
    // only closes; its buffered chunks are released.
    this.#body?.destroy();
    this.#owed = 0;
  }

  onDrain(): void {
    this.#controller?.resume();
  }

  // ---- undici DispatchHandler: the local target's response ----

  onRequestStart(controller: DispatchController): void {
    this.#controller = controller;
    // Reset in the moment between the agent's line and undici starting it (undici may hold one request
    // while its connections are all busy): aborted before a byte is written.
    if (this.#stream.closed) controller.abort(new Error('stream closed before the request started'));
  }

  onResponseStarted(): void {
    this.#answerBegun = true;
  }

  onResponseStart(
    controller: DispatchController,
    statusCode: number,
    _headers: unknown,
    statusMessage?: string,
  ): void {
    this.#replay = undefined; // the backend answered: whatever happens next, never send it again
    if (this.#stream.closed) return;
    // undici hands interim heads (103 Early Hints, 102) to onResponseStart before the final one; they are
    // relayed as informational heads. (A 100 never arrives here: this path sends no Expect.)
    if (statusCode >= 200) {
      this.#status = statusCode;
      this.#responseStarted = true;
    }
    const headers = responseFields(controller.rawHeaders);
    const head = encodeResponseHead(
      { status: statusCode, statusMessage: statusMessage ?? '', headers },
      this.#options.maxHeadSize,
    );
    if (statusCode >= 200) this.#recorder?.responseHead(statusCode, headers, head);
    this.#stream.sendHeaders(head, false);
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    this.#bytes += chunk.length;
    this.#recorder?.responseData(chunk);
    if (!this.#stream.write(chunk)) controller.pause();
  }

  onResponseEnd(controller: DispatchController): void {
    const trailers = controller.rawTrailers;
    const raw = rawHeaderStrings(trailers);
    this.#recorder?.responseTrailers(raw);
    if (raw.length > 0 && !this.#stream.closed) {
      this.#stream.sendHeaders(
        encodeResponseHead({ status: 200, statusMessage: '', headers: raw }, this.#options.maxHeadSize),
        true,
      );
    } else {
      this.#stream.end();
    }
    this.#report(undefined);
  }

  onResponseError(_controller: DispatchController, error: Error): void {
    const replay = this.#replay;
    this.#replay = undefined;
    if (replay !== undefined && !this.#answerBegun && !this.#stream.closed && isStaleConnection(error)) {
      // A pooled connection the backend closed as the request went out: once more, on a fresh one.
      this.#controller = undefined;
      this.#firstFailure = error;
      this.#options.backend.dispatch(replay, this);
      return;
    }
    this.#body?.destroy();
    if (this.#stream.closed) {
      this.#report(error.message, backendErrorCode(error));
      return;
    }
    if (this.#responseStarted) {
      // Part of the body is already on its way: the client must see the response aborted.
      this.#stream.reset(ErrorCode.BACKEND_ERROR);
      this.#report(`backend failed mid-response: ${backendErrorCode(error)}`, backendErrorCode(error));
      return;
    }
    // A backend that took the request and died meanwhile refuses the replay: the client is told what
    // happened to its request (closed before answering), not that nothing listens on the port.
    const cause =
      this.#firstFailure !== undefined && backendErrorCode(error) === 'ECONNREFUSED'
        ? this.#firstFailure
        : error;
    const { status, message, code } = describeBackendError(
      cause,
      this.#options.target.host,
      this.#answerBegun,
    );
    this.#status = status;
    sendBackendErrorAnswer(
      this.#stream,
      { status, message, code },
      this.#options.maxHeadSize,
      this.#recorder,
      { method: this.#method, headers: this.#requestHeaders, target: this.#options.target },
    );
    this.#report(message, code);
  }

  /**
   * A gRPC call for an HTTP/1.1 backend cannot work (gRPC needs HTTP/2 end to end and trailers): the client
   * is told in its own form, and the user what to run instead.
   */
  #refuseGrpc(payload: Buffer): void {
    this.#recorder = this.#options.capture?.begin({
      method: this.#method,
      target: this.#path,
      headers: this.#requestHeaders,
      encodedHead: payload,
    });
    const target = this.#options.target;
    const message =
      `tunnel2: a gRPC call needs an HTTP/2 backend, and ${target.host} is forwarded to over HTTP/1.1; ` +
      (target.origin.startsWith('https:')
        ? 'it did not offer h2 (ALPN): enable HTTP/2 on it, or drop --http1'
        : `run \`tunnel2 http ${target.host} --h2c\` for a backend that speaks HTTP/2 (gRPC servers do)`);
    const code: BackendErrorCode = 'TUNNEL2_ERR_BACKEND_NOT_HTTP2';
    this.#status = 200;
    sendGrpcErrorAnswer(
      this.#stream,
      { grpcStatus: GrpcStatus.UNIMPLEMENTED, message, code },
      this.#options.maxHeadSize,
      this.#recorder,
    );
    this.#report(message, code);
  }

  #report(error: string | undefined, code = 'exchange_failed'): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#recorder?.finish(error === undefined ? undefined : { code, message: error });
    const report: RequestReport = {
      method: this.#method,
      path: this.#path,
      status: this.#status,
      durationMs: Math.round((performance.now() - this.#started) * 100) / 100,
      bytes: this.#bytes,
    };
    if (error !== undefined) report.error = error;
    this.#options.onReport(report);
  }
}
