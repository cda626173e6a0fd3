import {
  ErrorCode,
  type MuxStream,
  type ResponseHead,
  type StreamHandler,
  type StreamResetError,
} from '@tunnel2/protocol';
import { EdgeErrorCode } from '../errors.js';
import { BODY_BEFORE_HEAD, writeBodyChunk } from './body-chunk.js';
import { ResponseFraming } from './response-framing.js';
import type { AcceptedHead } from './response-head-check.js';

export interface UpgradeTunnelContext {
  name: string;
  responseTimeoutMs: number;
  onFinish: () => void;
}

/**
 * What an upgrade does on its tunnel stream, whichever transport the client came by (`UpgradeTunnel`: an
 * HTTP/1.1 socket; `StreamUpgradeTunnel`: an RFC 8441 HTTP/2 stream): the backend's answer checked by the
 * same framing as a plain exchange, the response timeout until it comes, a refusal's body held to its
 * declared length, the stream's credit returned as the client takes the bytes, and one finish whatever ends
 * it. How a head, a byte, an end or an abort reaches the client is the transport's (the abstract members).
 */
export abstract class UpgradeStreamCore implements StreamHandler {
  protected readonly stream: MuxStream;
  protected readonly context: UpgradeTunnelContext;
  #timer: NodeJS.Timeout | undefined;
  #headSent = false;
  #done = false;
  /** Bytes written to the client while its buffer was full: credit handed back on its 'drain'. */
  #owed = 0;
  /** The answer's head checks and a refusal's declared body length (`Infinity` after a 101). */
  readonly #framing = new ResponseFraming({ method: 'GET', upgrade: true });
  /** The client as `writeBodyChunk` writes to it. */
  readonly #client = { write: (chunk: Buffer): boolean => this.writeToClient(chunk) };

  constructor(stream: MuxStream, context: UpgradeTunnelContext) {
    this.stream = stream;
    this.context = context;
    stream.handler = this;
    this.#timer = setTimeout(this.#onTimeout, context.responseTimeoutMs);
  }

  /** The backend's final answer went to the client (a 101, or a refusal that is now an ordinary response). */
  protected get headSent(): boolean {
    return this.#headSent;
  }

  /** The tunnel is over (answered, failed, or its client gone): nothing more is written. */
  protected get done(): boolean {
    return this.#done;
  }

  /** Writes the backend's final answer to the client; returns why it cannot be passed on, if it cannot. */
  protected abstract writeHead(head: ResponseHead, check: AcceptedHead): string | undefined;
  /** Body or upgraded bytes for the client; false while its buffer is full ('drain' follows). */
  protected abstract writeToClient(chunk: Buffer): boolean;
  /** The backend ended its side after an answer. */
  protected abstract endClient(): void;
  /** Cuts the client off: `cancelled` for a reset of the tunnel stream, else a broken framing. */
  protected abstract abortClient(cancelled: boolean): void;
  /** The edge's own error answer, before any answer of the backend's went out. */
  protected abstract answerError(code: EdgeErrorCode, message: string): void;
  /** The tunnel stream has credit again: the client's bytes may flow. */
  protected abstract resumeClient(): void;

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#headSent || this.#done) return;
    // The same framing as a plain exchange, checked before a byte of the head reaches the client.
    const framed = this.#framing.head(payload, endStream);
    if (!framed.ok) {
      this.#invalidHead(framed.problem);
      return;
    }
    const { head, check } = framed;
    // Interim heads are not relayed on an upgrade (the framing still counts them against a flood).
    if (check.kind === 'interim') return;
    this.#clearTimer();
    const problem = this.writeHead(head, check);
    if (problem !== undefined) {
      this.#invalidHead(problem);
      return;
    }
    this.#headSent = true;
  }

  onData(chunk: Buffer): void {
    if (this.#done) return;
    // Raw bytes before any head would reach the client as if they were the edge's answer.
    if (!this.#headSent) this.#invalidHead(BODY_BEFORE_HEAD);
    else {
      // A refusal's body past its declared length: what fits is written, then the client is cut off.
      const outcome = writeBodyChunk(this.#client, chunk, this.#framing);
      if (outcome === 'taken') this.stream.consume(chunk.length);
      else if (outcome === 'buffered') this.#owed += chunk.length;
      else this.#abort();
    }
  }

  onEnd(): void {
    if (this.#done) return;
    this.#clearTimer();
    if (!this.#headSent) {
      this.#fail(EdgeErrorCode.STREAM_FAILED, `tunnel ${this.context.name}: agent ended without a response`);
      return;
    }
    if (this.#framing.short) {
      // A refusal short of its declared length is aborted, not ended as if complete.
      this.#abort();
      return;
    }
    this.endClient();
    this.#finish();
  }

  onReset(error: StreamResetError): void {
    this.#clearTimer();
    if (this.#headSent) this.abortClient(true);
    else {
      const offline = error.protocolCode === ErrorCode.SESSION_CLOSED;
      this.#fail(
        offline ? EdgeErrorCode.TUNNEL_OFFLINE : EdgeErrorCode.STREAM_FAILED,
        offline
          ? `tunnel ${this.context.name} is offline`
          : `tunnel ${this.context.name}: the upgrade failed`,
      );
    }
    this.#finish();
  }

  onDrain(): void {
    this.resumeClient();
  }

  /** The client took what it had buffered ('drain'): the credit owed for it goes back to the stream. */
  protected readonly onClientDrain = (): void => {
    if (this.#owed === 0) return;
    const owed = this.#owed;
    this.#owed = 0;
    this.stream.consume(owed);
  };

  /** The client's connection or stream closed (or was reset by it): the tunnel stream goes with it. */
  protected readonly onClientClose = (): void => {
    this.#clearTimer();
    if (!this.stream.closed) this.stream.reset(ErrorCode.CANCEL);
    this.#finish();
  };

  #invalidHead(problem: string): void {
    this.#clearTimer();
    this.stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#fail(
      EdgeErrorCode.STREAM_FAILED,
      `tunnel ${this.context.name}: the backend sent an invalid response head: ${problem}`,
    );
  }

  /** The refusal's body broke its framing: the client is cut off and the stream reset as failed. */
  #abort(): void {
    this.#clearTimer();
    this.stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.abortClient(false);
    this.#finish();
  }

  #fail(code: EdgeErrorCode, message: string): void {
    this.answerError(code, message);
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.context.onFinish();
  }

  readonly #onTimeout = (): void => {
    this.#timer = undefined;
    if (this.#headSent) return;
    this.stream.reset(ErrorCode.CANCEL);
    this.#fail(
      EdgeErrorCode.RESPONSE_TIMEOUT,
      `tunnel ${this.context.name}: no answer to the upgrade within ${this.context.responseTimeoutMs} ms`,
    );
  };

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }
}
