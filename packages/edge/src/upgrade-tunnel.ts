import type { Duplex } from 'node:stream';
import {
  decodeResponseHead,
  ErrorCode,
  isProtocolError,
  type MuxStream,
  type ResponseHead,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { rejectUpgrade } from './error-response.js';
import { EdgeErrorCode } from './errors.js';
import { MAX_INTERIM_HEADS } from './informational.js';
import { serializeResponseHead } from './raw-http.js';
import { checkResponseHead } from './response-head-check.js';

export interface UpgradeTunnelContext {
  name: string;
  responseTimeoutMs: number;
  onFinish: () => void;
}

/**
 * A public WebSocket (or any accepted upgrade) carried over one stream. Until the backend answers, this is
 * an ordinary request; after a 101 the stream carries raw bytes both ways under the same flow control.
 * A refusal (any other status) is written back with its body, then the connection closes.
 */
export class UpgradeTunnel implements StreamHandler {
  readonly #socket: Duplex;
  readonly #stream: MuxStream;
  readonly #context: UpgradeTunnelContext;
  #timer: NodeJS.Timeout | undefined;
  #headSent = false;
  #done = false;
  #owed = 0;
  /** Body bytes a refusal may still carry (its Content-Length); `Infinity` after a 101 or when undeclared. */
  #left = Number.POSITIVE_INFINITY;
  /** Interim heads received; they are not relayed on an upgrade, but a flood of them still fails it. */
  #interim = 0;

  constructor(socket: Duplex, stream: MuxStream, context: UpgradeTunnelContext) {
    this.#socket = socket;
    this.#stream = stream;
    this.#context = context;
    stream.handler = this;
    this.#timer = setTimeout(this.#onTimeout, context.responseTimeoutMs);
    socket.on('drain', this.#onSocketDrain);
    socket.on('close', this.#onSocketClose);
    socket.on('error', () => {});
  }

  /** Client bytes (the WebSocket frames after the handshake) flow into the stream with backpressure. */
  pumpClientBytes(head: Buffer): void {
    if (head.length > 0) this.#stream.write(head);
    this.#socket.on('data', (chunk: Buffer) => {
      if (!this.#stream.write(chunk)) this.#socket.pause();
    });
    this.#socket.on('end', () => this.#stream.end());
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#headSent || this.#done) return;
    let head: ResponseHead;
    try {
      head = decodeResponseHead(payload);
    } catch (err) {
      if (!isProtocolError(err)) throw err;
      this.#invalidHead(err.message);
      return;
    }
    // The same check as a plain exchange, before a byte of the head is written to the raw socket.
    const check = checkResponseHead(head, { method: 'GET', upgrade: true });
    if (!check.ok) {
      this.#invalidHead(check.problem);
      return;
    }
    if (check.kind === 'interim') {
      if (endStream) this.#invalidHead(`the stream ended after the interim status ${head.status}`);
      else if (++this.#interim > MAX_INTERIM_HEADS)
        this.#invalidHead(`more than ${MAX_INTERIM_HEADS} interim (1xx) responses`);
      return;
    }
    this.#clearTimer();
    const upgraded = check.kind === 'switch';
    // A 101 keeps its Connection/Upgrade fields; a refusal is a normal response that ends the connection.
    const headers = upgraded ? check.headers : [...withoutHopByHop(check.headers), 'Connection', 'close'];
    this.#headSent = true;
    this.#left = check.bodyLimit;
    this.#socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
  }

  onData(chunk: Buffer): void {
    if (this.#done) return;
    if (!this.#headSent) {
      // Raw bytes before any head would reach the client as if they were the edge's answer.
      this.#invalidHead('body bytes before a final response head');
      return;
    }
    this.#left -= chunk.length;
    const left = this.#left;
    if (left < 0) {
      // A refusal's body past its declared length: what fits is written, then the connection is aborted.
      if (chunk.length + left > 0) this.#socket.write(chunk.subarray(0, chunk.length + left));
      this.#abort();
      return;
    }
    if (this.#socket.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  onEnd(): void {
    if (this.#done) return;
    this.#clearTimer();
    if (!this.#headSent) {
      this.#fail(EdgeErrorCode.STREAM_FAILED, `tunnel ${this.#context.name}: agent ended without a response`);
      return;
    }
    if (this.#left > 0 && this.#left !== Number.POSITIVE_INFINITY) {
      // A refusal short of its declared length is aborted, not ended as if complete.
      this.#abort();
      return;
    }
    this.#socket.end();
    this.#finish();
  }

  onReset(error: StreamResetError): void {
    this.#clearTimer();
    if (this.#headSent) this.#socket.destroy();
    else {
      const offline = error.protocolCode === ErrorCode.SESSION_CLOSED;
      this.#fail(
        offline ? EdgeErrorCode.TUNNEL_OFFLINE : EdgeErrorCode.STREAM_FAILED,
        offline
          ? `tunnel ${this.#context.name} is offline`
          : `tunnel ${this.#context.name}: the upgrade failed`,
      );
    }
    this.#finish();
  }

  onDrain(): void {
    this.#socket.resume();
  }

  #invalidHead(problem: string): void {
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#fail(
      EdgeErrorCode.STREAM_FAILED,
      `tunnel ${this.#context.name}: the backend sent an invalid response head: ${problem}`,
    );
  }

  /** The refusal's body broke its framing: the connection is destroyed and the stream reset as failed. */
  #abort(): void {
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#socket.destroy();
    this.#finish();
  }

  #fail(code: EdgeErrorCode, message: string): void {
    rejectUpgrade(this.#socket, { code, message });
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#context.onFinish();
  }

  readonly #onTimeout = (): void => {
    this.#timer = undefined;
    if (this.#headSent) return;
    this.#stream.reset(ErrorCode.CANCEL);
    this.#fail(
      EdgeErrorCode.RESPONSE_TIMEOUT,
      `tunnel ${this.#context.name}: no answer to the upgrade within ${this.#context.responseTimeoutMs} ms`,
    );
  };

  readonly #onSocketDrain = (): void => {
    if (this.#owed === 0) return;
    const owed = this.#owed;
    this.#owed = 0;
    this.#stream.consume(owed);
  };

  readonly #onSocketClose = (): void => {
    this.#clearTimer();
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.CANCEL);
    this.#finish();
  };

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }
}
