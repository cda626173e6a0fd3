import { u32Payload } from '../codec/control-frames.js';
import { ErrorCode, FrameFlags, FrameType } from '../constants.js';
import { ProtocolError, ProtocolErrorCode, type StreamResetError } from '../errors.js';
import { ReceiveWindow, type TuningHost } from './receive-window.js';
import type { WindowBudget } from './window-budget.js';

/** What a stream's owner hears from it. Every callback runs synchronously from the session's receive loop. */
export interface StreamHandler {
  /** A head arrived: the request (agent side) or the response (edge side); later ones are 1xx or trailers. */
  onHeaders(payload: Buffer, endStream: boolean): void;
  /** Body bytes. Call `stream.consume(chunk.length)` once they have been passed on, to return the credit. */
  onData(chunk: Buffer): void;
  /** The peer finished sending (END_STREAM). */
  onEnd(): void;
  /**
   * The stream was reset by the peer, by the session itself (a protocol violation on this stream, or a
   * handler that threw), or the session underneath it closed. Not called for the owner's own `reset()`.
   */
  onReset(error: StreamResetError): void;
  /** `write()` returned false earlier; the stream can take more now. */
  onDrain(): void;
}

/** The session services a stream relies on; implemented by MuxSession. */
export interface StreamHost extends TuningHost {
  readonly peerMaxFrameSize: number;
  readonly congested: boolean;
  sessionSendWindow: number;
  enqueue(type: number, flags: number, streamId: number, payload: Buffer | undefined): void;
  waitForSessionCredit(stream: MuxStream): void;
  waitForDrain(stream: MuxStream): void;
  creditSession(bytes: number): void;
  streamClosed(stream: MuxStream, resetCode: number | undefined): void;
}

const EMPTY = Buffer.alloc(0);

/**
 * One request/response exchange. Sending honours the peer's credit (stream and session windows):
 * bytes beyond the credit are held (at most what the source wrote before `write()` returned false)
 * and go out as WINDOW_UPDATEs arrive.
 */
export class MuxStream {
  readonly id: number;
  handler: StreamHandler | undefined;
  /** Free-form slot for the owner (e.g. the request this stream serves). */
  context: unknown;

  /** Credit the peer has granted for this stream. */
  sendWindow: number;
  /** Credit we have granted the peer and it has not used yet. */
  recvWindow: number;

  readonly #host: StreamHost;
  /** What the window is tuned with: the session, or the session with a budget of this stream's own. */
  #tuning: TuningHost;
  /** The receive window this stream grants: initialStreamWindow, tuned to the round trip. */
  readonly #window: ReceiveWindow;
  #pending: Buffer[] = [];
  #endPending = false;
  #localEnded = false;
  #remoteEnded = false;
  #closed = false;
  #needDrain = false;
  /** Bytes handed to the handler and not yet consumed. */
  #unconsumed = 0;
  /** Bytes consumed and not yet returned to the peer as stream credit. */
  #unacked = 0;
  #dataSeen = false;
  /** A head went out on this stream, or came in: the peer knows it, and may be sent WINDOW_UPDATEs. */
  #announced = false;
  /** Credit granted by growWindow before our head: it follows the head. */
  #grantAfterHead = 0;

  constructor(host: StreamHost, id: number, sendWindow: number, recvWindow: number) {
    this.#host = host;
    this.#tuning = host;
    this.id = id;
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
    this.#window = new ReceiveWindow(recvWindow);
  }

  get closed(): boolean {
    return this.#closed;
  }
  get localEnded(): boolean {
    return this.#localEnded || this.#endPending;
  }
  get remoteEnded(): boolean {
    return this.#remoteEnded;
  }
  /** Bytes written but still waiting for credit. */
  get pendingBytes(): number {
    let total = 0;
    for (const chunk of this.#pending) total += chunk.length;
    return total;
  }

  /**
   * Takes this stream's window growth from `budget` instead of the session's: a budget that draws on the
   * session's and bounds it further (a node link's tenant share). Only before the stream received DATA, so
   * nothing taken from the session's budget is left behind.
   */
  useWindowBudget(budget: WindowBudget): void {
    if (this.#dataSeen) throw this.#stateError('window budget set after DATA arrived');
    const host = this.#host;
    this.#tuning = {
      get rttMs() {
        return host.rttMs;
      },
      maxStreamWindow: host.maxStreamWindow,
      windowBudget: budget,
    };
  }

  /**
   * Grants the peer up to `bytes` of credit beyond the initial window, as growth taken from the window
   * budget (maybe less, or nothing, when the budget is spent): a stream expected to carry more than its
   * initial window needs no round trips to grow it. On a stream we opened and have not sent a head on yet,
   * the WINDOW_UPDATE follows the head (a peer ignores one for a stream it does not know). Returns the bytes
   * granted.
   */
  growWindow(bytes: number): number {
    if (this.#closed || this.#remoteEnded) return 0;
    const n = this.#window.growNow(bytes, this.#tuning);
    if (n <= 0) return 0;
    this.recvWindow += n;
    if (this.#announced) this.#host.enqueue(FrameType.WINDOW_UPDATE, 0, this.id, u32Payload(n));
    else this.#grantAfterHead += n;
    return n;
  }

  /** Sends a head (request, response, 1xx or trailers). */
  sendHeaders(payload: Buffer, endStream: boolean): void {
    this.#assertWritable('send headers');
    // The peer's decoder would fail the whole session on an oversized frame; refuse it here instead.
    if (payload.length > this.#host.peerMaxFrameSize) {
      throw new ProtocolError(
        ProtocolErrorCode.HEAD_TOO_LARGE,
        ErrorCode.HEADERS_TOO_LARGE,
        `stream ${this.id}: head of ${payload.length} bytes exceeds the peer's frame limit`,
      );
    }
    if (endStream) {
      if (this.#pending.length > 0) throw this.#stateError('end with body bytes still pending');
      this.#localEnded = true;
    }
    this.#host.enqueue(FrameType.HEADERS, endStream ? FrameFlags.END_STREAM : 0, this.id, payload);
    this.#announced = true;
    if (this.#grantAfterHead > 0) {
      this.#host.enqueue(FrameType.WINDOW_UPDATE, 0, this.id, u32Payload(this.#grantAfterHead));
      this.#grantAfterHead = 0;
    }
    if (endStream) this.#maybeClose();
  }

  /**
   * Queues body bytes. Returns false when the caller should pause its source until `onDrain`. The chunk is
   * sent as it is, without a copy, possibly after this returns: the caller must not change it afterwards
   * (Node's stream chunks, socket reads and undici's body chunks are fresh each time).
   */
  write(chunk: Buffer): boolean {
    if (this.#closed || this.#localEnded || this.#endPending) return false;
    if (chunk.length === 0) return this.#pending.length === 0 && !this.#host.congested;
    if (this.#pending.length > 0) {
      this.#pending.push(chunk);
      this.#needDrain = true;
      return false;
    }
    const sent = this.#send(chunk);
    if (sent < chunk.length) {
      this.#pending.push(sent === 0 ? chunk : chunk.subarray(sent));
      this.#needDrain = true;
      if (this.#host.sessionSendWindow === 0) this.#host.waitForSessionCredit(this);
      return false;
    }
    if (this.#host.congested) {
      this.#needDrain = true;
      this.#host.waitForDrain(this);
      return false;
    }
    return true;
  }

  /** Ends the sending side once every pending byte has gone out. */
  end(): void {
    if (this.#closed || this.#localEnded || this.#endPending) return;
    if (this.#pending.length > 0) {
      this.#endPending = true;
      return;
    }
    this.#localEnded = true;
    this.#host.enqueue(FrameType.DATA, FrameFlags.END_STREAM, this.id, EMPTY);
    this.#maybeClose();
  }

  /** Abandons the stream in both directions and tells the peer why. */
  reset(code: number): void {
    if (this.#closed) return;
    this.#host.enqueue(FrameType.RESET, 0, this.id, u32Payload(code));
    this.#close(code);
  }

  /** Returns credit for `bytes` the handler has passed on (written out, or pushed to a consumer that drained). */
  consume(bytes: number): void {
    if (this.#closed || bytes <= 0) return;
    const n = Math.min(bytes, this.#unconsumed);
    this.#unconsumed -= n;
    this.#host.creditSession(n);
    if (!this.#remoteEnded) {
      this.#unacked += n;
      this.#window.consumed(n, this.#tuning);
      if (this.#unacked >= this.#window.size >>> 2) {
        const increment = this.#window.credit(this.#unacked, this.#tuning.windowBudget);
        this.#unacked = 0;
        if (increment > 0) {
          this.recvWindow += increment;
          this.#host.enqueue(FrameType.WINDOW_UPDATE, 0, this.id, u32Payload(increment));
        }
      }
    }
    this.#maybeClose();
  }

  // ---- called by the session ----

  /** @internal */
  receiveHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#remoteEnded) throw this.#stateError('HEADERS after the peer ended the stream');
    this.#announced = true;
    if (endStream) this.#remoteEnded = true;
    this.handler?.onHeaders(payload, endStream);
    if (endStream) {
      this.handler?.onEnd();
      this.#maybeClose();
    }
  }

  /** @internal The session has already checked and charged the session window. */
  receiveData(payload: Buffer, endStream: boolean): void {
    if (this.#remoteEnded) {
      this.#host.creditSession(payload.length);
      throw this.#stateError('DATA after the peer ended the stream');
    }
    if (payload.length > this.recvWindow) {
      this.#host.creditSession(payload.length);
      throw new ProtocolError(
        ProtocolErrorCode.FLOW_CONTROL,
        ErrorCode.FLOW_CONTROL_ERROR,
        `stream ${this.id}: ${payload.length} bytes of DATA exceed the window of ${this.recvWindow}`,
      );
    }
    this.recvWindow -= payload.length;
    this.#dataSeen = true;
    if (endStream) this.#remoteEnded = true;
    if (payload.length > 0) {
      this.#unconsumed += payload.length;
      this.handler?.onData(payload);
    }
    if (endStream) {
      this.handler?.onEnd();
      this.#maybeClose();
    }
  }

  /** @internal */
  receiveWindowUpdate(increment: number): void {
    this.sendWindow += increment;
    if (this.sendWindow > 0x7f_ff_ff_ff) {
      throw new ProtocolError(
        ProtocolErrorCode.FLOW_CONTROL,
        ErrorCode.FLOW_CONTROL_ERROR,
        `stream ${this.id}: window grew past 2^31-1`,
      );
    }
    this.flushPending();
  }

  /** @internal The peer reset the stream, or the session died. */
  receiveReset(error: StreamResetError): void {
    if (this.#closed) return;
    this.#close(error.protocolCode);
    this.handler?.onReset(error);
  }

  /** @internal Sends held bytes as far as credit allows; announces drain when all went out. */
  flushPending(): void {
    while (this.#pending.length > 0 && !this.#closed) {
      const chunk = this.#pending[0]!;
      const sent = this.#send(chunk);
      if (sent < chunk.length) {
        this.#pending[0] = chunk.subarray(sent);
        if (this.#host.sessionSendWindow === 0) this.#host.waitForSessionCredit(this);
        return;
      }
      this.#pending.shift();
    }
    if (this.#closed) return;
    if (this.#endPending) {
      this.#endPending = false;
      this.#localEnded = true;
      this.#host.enqueue(FrameType.DATA, FrameFlags.END_STREAM, this.id, EMPTY);
      this.#maybeClose();
      return;
    }
    this.notifyDrain();
  }

  /** @internal */
  notifyDrain(): void {
    if (!this.#needDrain || this.#closed || this.#pending.length > 0) return;
    if (this.#host.congested) {
      this.#host.waitForDrain(this);
      return;
    }
    this.#needDrain = false;
    this.handler?.onDrain();
  }

  #send(chunk: Buffer): number {
    const credit = Math.min(this.sendWindow, this.#host.sessionSendWindow);
    const n = Math.min(credit, chunk.length);
    if (n <= 0) return 0;
    const maxFrame = this.#host.peerMaxFrameSize;
    for (let offset = 0; offset < n; offset += maxFrame) {
      const end = Math.min(offset + maxFrame, n);
      this.#host.enqueue(
        FrameType.DATA,
        0,
        this.id,
        offset === 0 && end === chunk.length ? chunk : chunk.subarray(offset, end),
      );
    }
    this.sendWindow -= n;
    this.#host.sessionSendWindow -= n;
    return n;
  }

  #maybeClose(): void {
    // Nothing more can arrive and nothing is held: the window's growth is free for other streams, even while
    // this stream still sends (a long response after an upload).
    if (this.#remoteEnded && this.#unconsumed === 0) this.#window.release(this.#tuning.windowBudget);
    if (!this.#closed && this.#localEnded && this.#remoteEnded && this.#unconsumed === 0)
      this.#close(undefined);
  }

  #close(resetCode: number | undefined): void {
    this.#closed = true;
    this.#window.release(this.#tuning.windowBudget);
    this.#pending = [];
    this.#endPending = false;
    // Bytes the handler never consumed are dropped with the stream: give their session credit back.
    if (this.#unconsumed > 0) {
      this.#host.creditSession(this.#unconsumed);
      this.#unconsumed = 0;
    }
    this.#host.streamClosed(this, resetCode);
  }

  #assertWritable(what: string): void {
    if (this.#closed) throw this.#stateError(`cannot ${what}: stream is closed`);
    if (this.#localEnded || this.#endPending) throw this.#stateError(`cannot ${what}: stream already ended`);
  }

  #stateError(message: string): ProtocolError {
    return new ProtocolError(
      ProtocolErrorCode.STREAM_STATE,
      ErrorCode.STREAM_CLOSED,
      `stream ${this.id}: ${message}`,
    );
  }
}
