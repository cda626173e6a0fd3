import { type EntryExtras, requestLine } from '../entries/captured-entry.js';
import type { EntryError, InFlightExchange } from '../entries/entry.js';
import { splitTarget } from '../entries/stored-entry.js';
import { BodyCapture, type CaptureBudget } from './body-capture.js';
import { WsFrameCounter } from './ws-frame-counter.js';

/** Head bytes larger than this are not kept for the next exchange when the slot goes back to the pool. */
const KEPT_HEADS_BYTES = 4 * 1024;
/** Room for both heads of a typical exchange, so most slots never grow. */
const INITIAL_HEADS_BYTES = 1024;

/**
 * The store as a slot sees it: the budget its bodies are captured against, and where the exchange goes when
 * it ends (EntryStore). Named here, not imported from entry-store.ts, since the store makes the slots.
 */
export interface SlotStore extends CaptureBudget {
  /** Stores the finished exchange in `slot` and returns its id; the slot goes back to the pool. */
  add(slot: ExchangeSlot): string;
}

/**
 * What the capture records of one exchange while it runs, reused from one exchange to the next (see
 * EntryStore's pool). The agent runs with a 3 MB young generation that fills every few milliseconds: an
 * object made per exchange and kept until the exchange ends outlives a scavenge, is promoted, and is then
 * freed only by a full collection. A slot is made once, promoted once, and after that each exchange writes
 * numbers into it and copies bytes into its buffers: nothing of it is allocated per request.
 * `generation` grows at every reuse: a recorder (the caller's handle) holding an older one is stale.
 */
export class ExchangeSlot {
  generation = 0;
  /** The store's number for the exchange now in the slot (see EntryStore.openSlot): its in-flight key. */
  seq = 0;
  readonly store: SlotStore;
  bodyLimit = 0;
  /** Both heads in the protocol's encoding: the request's at 0, the response's right after it. */
  heads: Buffer = Buffer.allocUnsafeSlow(INITIAL_HEADS_BYTES);
  requestHeadLength = 0;
  /** 0: no final response head came. */
  responseHeadLength = 0;
  kind: 'http' | 'websocket' = 'http';
  replayOf: string | undefined = undefined;
  clientAddress: string | undefined = undefined;
  /** The response's trailers, when it had any (a copy: see ExchangeRecorder.responseTrailers). */
  trailers: string[] | undefined = undefined;
  /** performance.now() at the start. */
  started = 0;
  /** Time to the response head, NaN until it came. */
  ttfb = Number.NaN;
  status = 0;
  /** The x-tunnel2-error of a 4xx/5xx head, read when it came (the list itself is not kept). */
  errorCode: string | undefined = undefined;
  bytesIn = 0;
  bytesOut = 0;
  /** Messages each way of an upgrade (made for WebSockets only). */
  framesIn: WsFrameCounter | undefined = undefined;
  framesOut: WsFrameCounter | undefined = undefined;
  durationMs = 0;
  extras: EntryExtras | undefined = undefined;
  done = true;
  readonly request: BodyCapture;
  readonly response: BodyCapture;
  /** The store's list of exchanges in flight, and its pool of free slots (links owned by the store). */
  livePrev: ExchangeSlot | undefined = undefined;
  liveNext: ExchangeSlot | undefined = undefined;

  constructor(store: SlotStore) {
    this.store = store;
    this.request = new BodyCapture(0, store);
    this.response = new BodyCapture(0, store);
  }

  /** Starts the next exchange in this slot. */
  open(bodyLimit: number, kind: 'http' | 'websocket', seq: number): void {
    this.generation++;
    this.seq = seq;
    this.done = false;
    this.bodyLimit = bodyLimit;
    this.request.reset(bodyLimit);
    this.response.reset(bodyLimit);
    this.kind = kind;
    this.started = performance.now();
    if (kind === 'websocket') {
      this.framesIn = new WsFrameCounter();
      this.framesOut = new WsFrameCounter();
    }
  }

  /** Forgets the exchange (its bytes were copied into the store), keeping buffers of a usual size. */
  close(): void {
    this.request.release();
    this.response.release();
    if (this.heads.length > KEPT_HEADS_BYTES) this.heads = Buffer.allocUnsafeSlow(INITIAL_HEADS_BYTES);
    this.requestHeadLength = 0;
    this.responseHeadLength = 0;
    this.replayOf = undefined;
    this.clientAddress = undefined;
    this.trailers = undefined;
    this.ttfb = Number.NaN;
    this.status = 0;
    this.errorCode = undefined;
    this.bytesIn = 0;
    this.bytesOut = 0;
    this.framesIn = undefined;
    this.framesOut = undefined;
    this.durationMs = 0;
    this.extras = undefined;
  }

  setRequestHead(head: Uint8Array): void {
    this.#room(head.length);
    this.heads.set(head, 0);
    this.requestHeadLength = head.length;
    this.responseHeadLength = 0;
  }

  /** The final response head, copied after the request's (a second one replaces the first). */
  setResponseHead(head: Uint8Array): void {
    this.#room(this.requestHeadLength + head.length);
    this.heads.set(head, this.requestHeadLength);
    this.responseHeadLength = head.length;
  }

  #room(size: number): void {
    if (size <= this.heads.length) return;
    const grown = Buffer.allocUnsafeSlow(Math.max(size, this.heads.length * 2));
    this.heads.copy(grown, 0, 0, this.requestHeadLength);
    this.heads = grown;
  }

  finishExtras(error: EntryError | undefined): void {
    if (error === undefined && this.errorCode !== undefined) {
      error = { code: this.errorCode, message: `answered with ${this.errorCode}` };
    }
    const { replayOf, clientAddress, trailers } = this;
    if (
      error !== undefined ||
      replayOf !== undefined ||
      clientAddress !== undefined ||
      trailers !== undefined
    ) {
      this.extras = { error, replayOf, clientAddress, trailers };
    }
    if (this.framesIn !== undefined && this.framesOut !== undefined) {
      this.extras ??= {};
      this.extras.ws = {
        bytesIn: this.bytesIn,
        bytesOut: this.bytesOut,
        messagesIn: this.framesIn.messages,
        messagesOut: this.framesOut.messages,
      };
    }
  }

  /** The exchange so far, for the API's list of those still running (an SSE stream, a WebSocket). */
  progress(): InFlightExchange {
    const { method, target } = requestLine(this.heads.subarray(0, this.requestHeadLength));
    const { path, query } = splitTarget(target);
    const websocket = this.framesIn !== undefined;
    return {
      startedAt: new Date(performance.timeOrigin + this.started).toISOString(),
      durationMs: roundMs(performance.now() - this.started),
      method,
      path,
      query,
      status: this.status,
      requestBytes: websocket ? this.bytesIn : this.request.size,
      responseBytes: websocket ? this.bytesOut : this.response.size,
      kind: this.kind,
      ...(this.replayOf === undefined ? {} : { replayOf: this.replayOf }),
    };
  }
}

export function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}
