import type { BodyCapture } from './body-capture.js';
import type { EntryError, WebSocketTraffic } from './entry.js';
import type { StoredEntry } from './stored-entry.js';

/** Turns a head the agent already encoded for the wire back into its flat header list (name, value, ...). */
export type HeadDecoder = (payload: Uint8Array) => readonly string[];

/** A head as an entry keeps it: the flat list, or the encoded bytes (read with the entry's decoder). */
export type KeptHead = readonly string[] | Uint8Array;

/** Every entry shares this empty list (a 1xx-less exchange that failed before a head has none). */
const NO_HEADERS: readonly string[] = [];

/**
 * A finished exchange as the store keeps it. A ring of up to 1,000 entries outlives the young generation at
 * any real rate, so every object an entry holds is promoted and later freed by a full collection: a flat
 * header list is ~20 strings per head. An entry therefore holds a head as the bytes the exchange encoded for
 * the wire (one buffer) and decodes it only when the API reads it.
 */
export class CapturedEntry implements StoredEntry {
  readonly id: string;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly ttfbMs: number | null;
  readonly clientAddress: string | null;
  readonly method: string;
  readonly target: string;
  readonly status: number;
  readonly request: BodyCapture;
  readonly response: BodyCapture;
  readonly kind: 'http' | 'websocket';
  readonly error: EntryError | undefined;
  readonly replayOf: string | undefined;
  readonly ws: WebSocketTraffic | undefined;
  readonly cost: number;
  readonly #requestHead: KeptHead;
  readonly #responseHead: KeptHead | undefined;
  readonly #decodeRequest: HeadDecoder | undefined;
  readonly #decodeResponse: HeadDecoder | undefined;

  constructor(fields: CapturedFields) {
    this.id = fields.id;
    this.startedAt = fields.startedAt;
    this.durationMs = fields.durationMs;
    this.ttfbMs = fields.ttfbMs;
    this.clientAddress = fields.clientAddress;
    this.method = fields.method;
    this.target = fields.target;
    this.status = fields.status;
    this.request = fields.request;
    this.response = fields.response;
    this.kind = fields.kind;
    this.error = fields.error;
    this.replayOf = fields.replayOf;
    this.ws = fields.ws;
    this.#requestHead = fields.requestHead;
    this.#responseHead = fields.responseHead;
    this.#decodeRequest = fields.decodeRequest;
    this.#decodeResponse = fields.decodeResponse;
    this.cost =
      FIXED_COST +
      this.request.captured +
      this.response.captured +
      this.target.length * 2 +
      keptCost(fields.requestHead) +
      (fields.responseHead === undefined ? 0 : keptCost(fields.responseHead));
  }

  get requestHeaders(): readonly string[] {
    return headersOf(this.#requestHead, this.#decodeRequest);
  }

  get responseHeaders(): readonly string[] {
    return this.#responseHead === undefined
      ? NO_HEADERS
      : headersOf(this.#responseHead, this.#decodeResponse);
  }
}

/** The entry's fields, with its heads as kept (optional ones present, maybe undefined: one shape for all). */
export interface CapturedFields
  extends Omit<StoredEntry, 'cost' | 'requestHeaders' | 'responseHeaders' | 'error' | 'replayOf' | 'ws'> {
  error: EntryError | undefined;
  replayOf: string | undefined;
  ws: WebSocketTraffic | undefined;
  requestHead: KeptHead;
  responseHead: KeptHead | undefined;
  /** Given with an encoded request head. */
  decodeRequest: HeadDecoder | undefined;
  /** Given with an encoded response head. */
  decodeResponse: HeadDecoder | undefined;
}

function headersOf(kept: KeptHead, decode: HeadDecoder | undefined): readonly string[] {
  if (!(kept instanceof Uint8Array)) return kept;
  return decode === undefined ? NO_HEADERS : decode(kept);
}

const FIXED_COST = 512;

/** What a head costs the budget: a list's strings at two bytes a code unit plus a little each; bytes as is. */
function keptCost(kept: KeptHead): number {
  if (kept instanceof Uint8Array) return kept.length + 16;
  let cost = 0;
  for (const h of kept) cost += h.length * 2 + 16;
  return cost;
}
