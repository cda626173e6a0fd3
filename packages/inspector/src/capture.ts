import { encodeRequestHead, encodeResponseHead } from '@tunnel2/protocol';
import { BodyCapture } from './body-capture.js';
import type { EntryExtras } from './captured-entry.js';
import type { EntryError } from './entry.js';
import type { EntryStore } from './entry-store.js';
import { headerValue } from './stored-entry.js';
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
 * nothing here waits or allocates beyond the copies of the bytes kept. On finish the whole exchange goes
 * into the store as one place in its arena: what this object held dies young.
 */
export class ExchangeRecorder {
  readonly #store: EntryStore;
  readonly #start: RequestStart;
  readonly #requestHead: Buffer | undefined;
  readonly #started = performance.now();
  readonly #request: BodyCapture;
  readonly #response: BodyCapture;
  #ttfb: number | null = null;
  #status = 0;
  #responseHeaders: readonly string[] | undefined;
  #encodedResponse: Uint8Array | undefined;
  #bytesIn = 0;
  #bytesOut = 0;
  /** Messages each way of an upgrade, read from its frame headers. */
  readonly #framesIn: WsFrameCounter | undefined;
  readonly #framesOut: WsFrameCounter | undefined;
  #done = false;

  constructor(store: EntryStore, start: RequestStart, bodyLimit: number) {
    this.#store = store;
    this.#start = start;
    // A copy, taken now: the frame's payload is a view into a received message that is not ours to keep.
    this.#requestHead = start.encodedHead === undefined ? undefined : Buffer.from(start.encodedHead);
    this.#request = new BodyCapture(bodyLimit, store);
    this.#response = new BodyCapture(bodyLimit, store);
    if (start.kind === 'websocket') {
      this.#framesIn = new WsFrameCounter();
      this.#framesOut = new WsFrameCounter();
    }
  }

  requestData(chunk: Uint8Array): void {
    this.#request.add(chunk);
  }

  /**
   * The final response head (interim 1xx heads are not recorded; a 101 is final for an upgrade). `encoded`:
   * the same head as the protocol encoded it for the wire, kept by reference (the caller never writes to it
   * again) until the exchange ends.
   */
  responseHead(status: number, headers: readonly string[], encoded?: Uint8Array): void {
    if (this.#ttfb === null) this.#ttfb = performance.now() - this.#started;
    this.#status = status;
    this.#responseHeaders = headers;
    this.#encodedResponse = encoded;
  }

  responseData(chunk: Uint8Array): void {
    this.#response.add(chunk);
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
    const start = this.#start;
    const responseHeaders = this.#responseHeaders;
    // The agent's and the edge's own answers are 4xx/5xx: only those are searched for their code.
    if (error === undefined && this.#status >= 400 && responseHeaders !== undefined) {
      const code = headerValue(responseHeaders, 'x-tunnel2-error');
      if (code !== undefined) error = { code, message: `answered with ${code}` };
    }
    const kind = start.kind ?? 'http';
    const now = performance.now();
    let extras: EntryExtras | undefined;
    if (error !== undefined || start.replayOf !== undefined || start.clientAddress !== undefined) {
      extras = { error, replayOf: start.replayOf, clientAddress: start.clientAddress };
    }
    if (kind === 'websocket') {
      extras ??= {};
      extras.ws = {
        bytesIn: this.#bytesIn,
        bytesOut: this.#bytesOut,
        messagesIn: this.#framesIn?.messages ?? 0,
        messagesOut: this.#framesOut?.messages ?? 0,
      };
    }
    return this.#store.add({
      // One clock read per event: the wall-clock start is the monotonic one placed on the epoch.
      startedAt: Math.round(performance.timeOrigin + this.#started),
      durationMs: round(now - this.#started),
      ttfbMs: this.#ttfb === null ? null : round(this.#ttfb),
      status: this.#status,
      kind,
      requestHead: this.#requestHead ?? encodedRequest(start),
      responseHead:
        this.#encodedResponse ??
        (responseHeaders === undefined ? undefined : encodedResponse(this.#status, responseHeaders)),
      request: this.#request,
      response: this.#response,
      extras,
    });
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
