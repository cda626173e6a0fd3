import type { Duplex } from 'node:stream';
import {
  ErrorCode,
  type MuxStream,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { rejectUpgrade } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import { serializeResponseHead } from './raw-http.js';
import { ResponseFraming } from './response-framing.js';

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
  /** The answer's head checks and a refusal's declared body length (`Infinity` after a 101). */
  readonly #framing = new ResponseFraming({ method: 'GET', upgrade: true });

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

  /**
   * Client bytes (the WebSocket frames after the handshake) flow into the stream with backpressure, from
   * the start: a client may send its first message before the 101, and the agent holds it (within the
   * stream's window) until its backend switched.
   */
  pumpClientBytes(head: Buffer): void {
    if (head.length > 0) this.#stream.write(head);
    this.#socket.on('data', (chunk: Buffer) => {
      if (!this.#stream.write(chunk)) this.#socket.pause();
    });
    this.#socket.on('end', this.#onSocketEnd);
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#headSent || this.#done) return;
    // The same framing as a plain exchange, checked before a byte of the head is written to the raw socket.
    const framed = this.#framing.head(payload, endStream);
    if (!framed.ok) {
      this.#invalidHead(framed.problem);
      return;
    }
    const { head, check } = framed;
    // Interim heads are not relayed on an upgrade (the framing still counts them against a flood).
    if (check.kind === 'interim') return;
    this.#clearTimer();
    const upgraded = check.kind === 'switch';
    // A 101 keeps its Connection/Upgrade fields; a refusal is a normal response that ends the connection.
    const headers = upgraded ? check.headers : [...withoutHopByHop(check.headers), 'Connection', 'close'];
    this.#headSent = true;
    this.#socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
  }

  onData(chunk: Buffer): void {
    if (this.#done) return;
    if (!this.#headSent) {
      // Raw bytes before any head would reach the client as if they were the edge's answer.
      this.#invalidHead('body bytes before a final response head');
      return;
    }
    const fit = this.#framing.fit(chunk.length);
    if (fit < chunk.length) {
      // A refusal's body past its declared length: what fits is written, then the connection is aborted.
      if (fit > 0) this.#socket.write(chunk.subarray(0, fit));
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
    if (this.#framing.short) {
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

  /**
   * The client's FIN. After an answer it is a half-close, passed on. Before one, the client is gone, as
   * Node's HTTP server takes a FIN while a plain request waits for its answer: the stream is cancelled, so
   * the agent closes its backend connection now, not at the response timeout.
   */
  readonly #onSocketEnd = (): void => {
    if (this.#headSent) {
      this.#stream.end();
      return;
    }
    if (this.#done) return;
    this.#clearTimer();
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.CANCEL);
    this.#socket.destroy();
    this.#finish();
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
