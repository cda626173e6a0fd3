import { encodeRequestHead, encodeResponseHead } from '@tunnel2/protocol';
import { BodyCapture } from './body-capture.js';
import { type EntryExtras, requestLine } from './captured-entry.js';
import type { EntryError, InFlightExchange } from './entry.js';
import type { EntryStore, FinishedExchange } from './entry-store.js';
import { headerValue, splitTarget } from './stored-entry.js';
import { WsFrameCounter } from './ws-frame-counter.js';

export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** A head the inspector encodes itself (a flat list given) may be this large; past it, its fields are dropped. */
const MAX_KEPT_HEAD = 1024 * 1024;

export interface RequestStart {
  method: string;
  /** Request target as received (path and query). */
  target: string;
  /** Flat name, value, ... in the order received, repeats kept. */
  headers: readonly string[];
  /**
   * The same head as the protocol encodes it (a request-head frame's payload): the entry keeps a copy of
   * these bytes instead of encoding the list again, and decodes them only when read.
   */
  encodedHead?: Uint8Array;
  /** When not given: the first hop of X-Forwarded-For (the edge sets it). */
  clientAddress?: string;
  kind?: 'http' | 'websocket';
  replayOf?: string;
}

/**
 * One exchange being recorded. The agent calls it from its own exchange, once per head and per body chunk;
 * nothing here waits, and it allocates little beyond the copies of the bytes kept: the agent runs with a
 * small young generation, where every byte allocated per request brings the next scavenge closer. On finish
 * the store copies the exchange into one place of its arena (reading it through FinishedExchange): what this
 * object held dies young.
 */
export class ExchangeRecorder implements FinishedExchange {
  readonly #store: EntryStore;
  readonly #bodyLimit: number;
  /** The head as bytes: nothing of the request's own objects (its header list, strings) is held. */
  readonly #requestHead: Buffer;
  readonly #kind: 'http' | 'websocket';
  readonly #replayOf: string | undefined;
  readonly #clientAddress: string | undefined;
  readonly #started = performance.now();
  /** Created with the first byte of each body (most requests have none). */
  #request: BodyCapture | undefined;
  #response: BodyCapture | undefined;
  #ttfb: number | null = null;
  #status = 0;
  #responseHead: Uint8Array | undefined;
  /** The x-tunnel2-error of a 4xx/5xx head, read when it came (the list itself is not kept). */
  #errorCode: string | undefined;
  #bytesIn = 0;
  #bytesOut = 0;
  /** Messages each way of an upgrade, read from its frame headers. */
  readonly #framesIn: WsFrameCounter | undefined;
  readonly #framesOut: WsFrameCounter | undefined;
  #durationMs = 0;
  #extras: EntryExtras | undefined;
  #done = false;
  /** The store's list of exchanges in flight (links owned by the store). */
  livePrev: ExchangeRecorder | undefined;
  liveNext: ExchangeRecorder | undefined;

  constructor(store: EntryStore, start: RequestStart, bodyLimit: number) {
    this.#store = store;
    this.#bodyLimit = bodyLimit;
    this.#kind = start.kind ?? 'http';
    this.#replayOf = start.replayOf;
    this.#clientAddress = start.clientAddress;
    // A copy, taken now: the frame's payload is a view into a received message that is not ours to keep.
    this.#requestHead =
      start.encodedHead === undefined ? encodedRequest(start) : Buffer.from(start.encodedHead);
    if (start.kind === 'websocket') {
      this.#framesIn = new WsFrameCounter();
      this.#framesOut = new WsFrameCounter();
    }
    store.began(this);
  }

  /** The exchange so far, for the API's list of those still running (an SSE stream, a WebSocket). */
  progress(): InFlightExchange {
    const { method, target } = requestLine(this.#requestHead);
    const { path, query } = splitTarget(target);
    const websocket = this.#framesIn !== undefined;
    return {
      startedAt: new Date(performance.timeOrigin + this.#started).toISOString(),
      durationMs: round(performance.now() - this.#started),
      method,
      path,
      query,
      status: this.#status,
      requestBytes: websocket ? this.#bytesIn : (this.#request?.size ?? 0),
      responseBytes: websocket ? this.#bytesOut : (this.#response?.size ?? 0),
      kind: this.kind,
      ...(this.#replayOf === undefined ? {} : { replayOf: this.#replayOf }),
    };
  }

  requestData(chunk: Uint8Array): void {
    (this.#request ?? this.#newRequestBody()).add(chunk);
  }

  #newRequestBody(): BodyCapture {
    this.#request = new BodyCapture(this.#bodyLimit, this.#store);
    return this.#request;
  }

  /**
   * The final response head (interim 1xx heads are not recorded; a 101 is final for an upgrade). `encoded`:
   * the same head as the protocol encoded it for the wire, kept by reference (the caller never writes to it
   * again) until the exchange ends; without it the list is encoded now. The list itself is not kept.
   */
  responseHead(status: number, headers: readonly string[], encoded?: Uint8Array): void {
    if (this.#ttfb === null) this.#ttfb = performance.now() - this.#started;
    this.#status = status;
    this.#responseHead = encoded ?? encodedResponse(status, headers);
    // The agent's and the edge's own answers are 4xx/5xx: only those are searched for their code.
    this.#errorCode = status >= 400 ? headerValue(headers, 'x-tunnel2-error') : undefined;
  }

  responseData(chunk: Uint8Array): void {
    (this.#response ?? this.#newResponseBody()).add(chunk);
  }

  #newResponseBody(): BodyCapture {
    this.#response = new BodyCapture(this.#bodyLimit, this.#store);
    return this.#response;
  }

  /**
   * Upgraded traffic, `in` from the client: counted (bytes, and WebSocket messages from the frame headers),
   * never kept.
   */
  tunnelData(direction: 'in' | 'out', chunk: Uint8Array): void {
    if (direction === 'in') {
      this.#bytesIn += chunk.length;
      this.#framesIn?.add(chunk);
    } else {
      this.#bytesOut += chunk.length;
      this.#framesOut?.add(chunk);
    }
  }

  /** Ends the record and stores it, numbered now; returns its id (a second call does nothing). */
  finish(error?: EntryError): string | undefined {
    if (this.#done) return undefined;
    this.#done = true;
    this.#store.ended(this);
    this.#durationMs = round(performance.now() - this.#started);
    const code = this.#errorCode;
    if (error === undefined && code !== undefined) error = { code, message: `answered with ${code}` };
    if (error !== undefined || this.#replayOf !== undefined || this.#clientAddress !== undefined) {
      this.#extras = { error, replayOf: this.#replayOf, clientAddress: this.#clientAddress };
    }
    if (this.#framesIn !== undefined && this.#framesOut !== undefined) {
      this.#extras ??= {};
      this.#extras.ws = {
        bytesIn: this.#bytesIn,
        bytesOut: this.#bytesOut,
        messagesIn: this.#framesIn.messages,
        messagesOut: this.#framesOut.messages,
      };
    }
    return this.#store.add(this);
  }

  // ---- FinishedExchange: read by the store when it stores the exchange ----

  get startedAt(): number {
    // One clock read per event: the wall-clock start is the monotonic one placed on the epoch.
    return Math.round(performance.timeOrigin + this.#started);
  }

  get durationMs(): number {
    return this.#durationMs;
  }

  get ttfbMs(): number | null {
    return this.#ttfb === null ? null : round(this.#ttfb);
  }

  get status(): number {
    return this.#status;
  }

  get kind(): 'http' | 'websocket' {
    return this.#kind;
  }

  get requestHeadBytes(): Uint8Array {
    return this.#requestHead;
  }

  get responseHeadBytes(): Uint8Array | undefined {
    return this.#responseHead;
  }

  get request(): BodyCapture | undefined {
    return this.#request;
  }

  get response(): BodyCapture | undefined {
    return this.#response;
  }

  get extras(): EntryExtras | undefined {
    return this.#extras;
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** A head given as a list, in the protocol's encoding; one the protocol cannot carry keeps no fields. */
function encodedRequest(start: RequestStart): Buffer {
  const target = start.target.length > 0xff_ff ? start.target.slice(0, 0xff_ff) : start.target;
  const method = start.method.slice(0, 0xff) || '?';
  try {
    return encodeRequestHead({ method, target, headers: [...start.headers] }, MAX_KEPT_HEAD);
  } catch {
    return encodeRequestHead({ method, target, headers: [] }, MAX_KEPT_HEAD);
  }
}

function encodedResponse(status: number, headers: readonly string[]): Buffer {
  // The entry's status is kept beside the head: one the protocol cannot carry is encoded as a placeholder.
  const code = status >= 100 && status <= 999 ? status : 999;
  try {
    return encodeResponseHead({ status: code, statusMessage: '', headers: [...headers] }, MAX_KEPT_HEAD);
  } catch {
    return encodeResponseHead({ status: code, statusMessage: '', headers: [] }, MAX_KEPT_HEAD);
  }
}

/** The hook the agent holds: a recorder per exchange, or undefined while capture is paused. */
export interface InspectorCapture {
  begin(start: RequestStart): ExchangeRecorder | undefined;
}

export function createCapture(store: EntryStore, bodyLimit: number): InspectorCapture {
  // Decodings are kept within the same limit as captures.
  store.decodeLimit = bodyLimit;
  return {
    begin: (start) => (store.paused ? undefined : new ExchangeRecorder(store, start, bodyLimit)),
  };
}
