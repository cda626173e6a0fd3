import type { Duplex } from 'node:stream';
import {
  decodeResponseHead,
  ErrorCode,
  type MuxStream,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { rejectUpgrade } from './error-response.js';
import { EdgeErrorCode } from './errors.js';
import { headersAreSafe, serializeResponseHead } from './raw-http.js';

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

  onHeaders(payload: Buffer): void {
    if (this.#headSent) return;
    const head = decodeResponseHead(payload);
    if (head.status < 200 && head.status !== 101) return;
    this.#clearTimer();
    const upgraded = head.status === 101;
    // A 101 keeps its Connection/Upgrade fields; a refusal is a normal response that ends the connection.
    const headers = upgraded ? head.headers : [...withoutHopByHop(head.headers), 'Connection', 'close'];
    if (!headersAreSafe(headers)) {
      this.#fail(
        EdgeErrorCode.STREAM_FAILED,
        `tunnel ${this.#context.name}: the backend sent an invalid response head`,
      );
      this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
      return;
    }
    this.#headSent = true;
    this.#socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
  }

  onData(chunk: Buffer): void {
    if (this.#socket.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  onEnd(): void {
    this.#clearTimer();
    if (!this.#headSent) {
      this.#fail(EdgeErrorCode.STREAM_FAILED, `tunnel ${this.#context.name}: agent ended without a response`);
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
