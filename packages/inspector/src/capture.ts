import { BodyCapture } from './body-capture.js';
import { CapturedEntry, type HeadDecoder, type KeptHead } from './captured-entry.js';
import type { EntryError } from './entry.js';
import type { EntryStore } from './entry-store.js';
import { headerValue, type StoredEntry } from './stored-entry.js';

export const DEFAULT_BODY_LIMIT = 1024 * 1024;

export interface RequestStart {
  method: string;
  /** Request target as received (path and query). */
  target: string;
  /** Flat name, value, ... in the order received, repeats kept. */
  headers: readonly string[];
  /**
   * The same head as the agent received it encoded (a frame's payload): when given with its decoder, the
   * entry keeps a copy of these bytes instead of the list and decodes them only when read.
   */
  encodedHead?: Uint8Array;
  /** Reads `encodedHead` back into the flat header list. */
  decodeHead?: HeadDecoder;
  /** When not given: the first hop of X-Forwarded-For (the edge sets it). */
  clientAddress?: string;
  kind?: 'http' | 'websocket';
  replayOf?: string;
}

/**
 * One exchange being recorded. The agent calls it from its own exchange, once per head and per body chunk;
 * nothing here waits or allocates beyond the copies of the bytes kept.
 */
export class ExchangeRecorder {
  readonly #store: EntryStore;
  readonly #start: RequestStart;
  readonly #requestHead: KeptHead;
  readonly #started = performance.now();
  readonly #request: BodyCapture;
  readonly #response: BodyCapture;
  #ttfb: number | null = null;
  #status = 0;
  #responseHeaders: readonly string[] = [];
  #encodedResponse: Uint8Array | undefined;
  #decodeResponse: HeadDecoder | undefined;
  #bytesIn = 0;
  #bytesOut = 0;
  #done = false;

  constructor(store: EntryStore, start: RequestStart, bodyLimit: number) {
    this.#store = store;
    this.#start = start;
    // A copy, taken now: the frame's payload is a view into a received message that is not ours to keep.
    this.#requestHead =
      start.encodedHead !== undefined && start.decodeHead !== undefined
        ? Buffer.from(start.encodedHead)
        : start.headers;
    this.#request = new BodyCapture(bodyLimit, store);
    this.#response = new BodyCapture(bodyLimit, store);
  }

  requestData(chunk: Uint8Array): void {
    this.#request.add(chunk);
  }

  /**
   * The final response head (interim 1xx heads are not recorded; a 101 is final for an upgrade). `encoded`,
   * with its decoder: the same head as sent on the wire, kept by reference (the caller never writes to it
   * again) and decoded only when read.
   */
  responseHead(status: number, headers: readonly string[], encoded?: Uint8Array, decode?: HeadDecoder): void {
    if (this.#ttfb === null) this.#ttfb = performance.now() - this.#started;
    this.#status = status;
    this.#responseHeaders = headers;
    this.#encodedResponse = decode === undefined ? undefined : encoded;
    this.#decodeResponse = decode;
  }

  responseData(chunk: Uint8Array): void {
    this.#response.add(chunk);
  }

  /** Upgraded traffic: counted only, never kept. */
  tunnelBytes(direction: 'in' | 'out', bytes: number): void {
    if (direction === 'in') this.#bytesIn += bytes;
    else this.#bytesOut += bytes;
  }

  /** Ends the record and stores it, numbered now (a second call does nothing). */
  finish(error?: EntryError): StoredEntry | undefined {
    if (this.#done) return undefined;
    this.#done = true;
    // The agent's and the edge's own answers are 4xx/5xx: only those are searched for their code.
    if (error === undefined && this.#status >= 400) {
      const code = headerValue(this.#responseHeaders, 'x-tunnel2-error');
      if (code !== undefined) error = { code, message: `answered with ${code}` };
    }
    const start = this.#start;
    const kind = start.kind ?? 'http';
    const now = performance.now();
    const requestHead = this.#requestHead;
    // The copies were reserved while they came in; stored, they count as the entry's cost instead.
    this.#request.releaseCopies();
    this.#response.releaseCopies();
    return this.#store.add(
      (id) =>
        new CapturedEntry({
          id,
          // One clock read per event: the wall-clock start is the monotonic one placed on the epoch.
          startedAt: Math.round(performance.timeOrigin + this.#started),
          durationMs: round(now - this.#started),
          ttfbMs: this.#ttfb === null ? null : round(this.#ttfb),
          clientAddress: start.clientAddress ?? null,
          method: start.method,
          target: start.target,
          status: this.#status,
          request: this.#request,
          response: this.#response,
          kind,
          error,
          replayOf: start.replayOf,
          ws: kind === 'websocket' ? { bytesIn: this.#bytesIn, bytesOut: this.#bytesOut } : undefined,
          requestHead,
          responseHead: this.#encodedResponse ?? this.#responseHeaders,
          decodeRequest: requestHead instanceof Uint8Array ? start.decodeHead : undefined,
          decodeResponse: this.#decodeResponse,
        }),
    );
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** The hook the agent holds: a recorder per exchange, or undefined while capture is paused. */
export interface InspectorCapture {
  begin(start: RequestStart): ExchangeRecorder | undefined;
}

export function createCapture(store: EntryStore, bodyLimit: number): InspectorCapture {
  return {
    begin: (start) => (store.paused ? undefined : new ExchangeRecorder(store, start, bodyLimit)),
  };
}
