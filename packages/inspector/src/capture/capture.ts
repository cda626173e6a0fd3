import { encodeRequestHead, encodeResponseHead } from '@tunnel2/protocol';
import type { EntryError } from '../entries/entry.js';
import { headerValue } from '../entries/stored-entry.js';
import type { EntryStore } from './entry-store.js';
import { type ExchangeSlot, roundMs } from './exchange-slot.js';

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
 * One exchange being recorded: the caller's handle on a slot of the store's pool (see ExchangeSlot), where
 * the exchange's numbers and copied bytes are kept. The agent calls it from its own exchange, once per head
 * and per body chunk; nothing here waits or allocates per call. On finish the store copies the exchange
 * into one place of its arena and the slot goes back to the pool: a call through this handle after that
 * (the slot may hold another exchange by then) does nothing.
 */
export class ExchangeRecorder {
  readonly #slot: ExchangeSlot;
  readonly #generation: number;

  constructor(store: EntryStore, start: RequestStart, bodyLimit: number) {
    const slot = store.openSlot(bodyLimit, start.kind ?? 'http');
    this.#slot = slot;
    this.#generation = slot.generation;
    slot.replayOf = start.replayOf;
    slot.clientAddress = start.clientAddress;
    // A copy, taken now: the frame's payload is a view into a received message that is not ours to keep.
    slot.setRequestHead(start.encodedHead ?? encodedRequest(start));
  }

  /** The slot, while it still holds this exchange. */
  #live(): ExchangeSlot | undefined {
    const slot = this.#slot;
    return slot.generation === this.#generation && !slot.done ? slot : undefined;
  }

  requestData(chunk: Uint8Array): void {
    this.#live()?.request.add(chunk);
  }

  /**
   * The final response head (interim 1xx heads are not recorded; a 101 is final for an upgrade). `encoded`:
   * the same head as the protocol encoded it for the wire, copied now; without it the list is encoded (with
   * `statusMessage`, the reason phrase, when given). The list itself is not kept.
   */
  responseHead(status: number, headers: readonly string[], encoded?: Uint8Array, statusMessage = ''): void {
    const slot = this.#live();
    if (slot === undefined) return;
    if (Number.isNaN(slot.ttfb)) slot.ttfb = performance.now() - slot.started;
    slot.status = status;
    slot.setResponseHead(encoded ?? encodedResponse(status, headers, statusMessage));
    // The agent's and the edge's own answers are 4xx/5xx: only those are searched for their code.
    slot.errorCode = status >= 400 ? headerValue(headers, 'x-tunnel2-error') : undefined;
  }

  responseData(chunk: Uint8Array): void {
    this.#live()?.response.add(chunk);
  }

  /**
   * The response's trailers (HTTP/2's, gRPC's `grpc-status`), flat name, value, ...: a copy is kept with the
   * entry. Most exchanges have none, and then nothing is allocated.
   */
  responseTrailers(fields: readonly string[]): void {
    const slot = this.#live();
    if (slot === undefined || fields.length === 0) return;
    slot.trailers = [...fields];
  }

  /**
   * Upgraded traffic, `in` from the client: counted (bytes, and WebSocket messages from the frame headers),
   * never kept.
   */
  tunnelData(direction: 'in' | 'out', chunk: Uint8Array): void {
    const slot = this.#live();
    if (slot === undefined) return;
    if (direction === 'in') {
      slot.bytesIn += chunk.length;
      slot.framesIn?.add(chunk);
    } else {
      slot.bytesOut += chunk.length;
      slot.framesOut?.add(chunk);
    }
  }

  /** Ends the record and stores it, numbered now; returns its id (a second call does nothing). */
  finish(error?: EntryError): string | undefined {
    const slot = this.#live();
    if (slot === undefined) return undefined;
    slot.done = true;
    slot.durationMs = roundMs(performance.now() - slot.started);
    slot.finishExtras(error);
    return slot.store.add(slot);
  }
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

function encodedResponse(status: number, headers: readonly string[], statusMessage: string): Buffer {
  // The entry's status is kept beside the head: one the protocol cannot carry is encoded as a placeholder.
  const code = status >= 100 && status <= 999 ? status : 999;
  try {
    return encodeResponseHead({ status: code, statusMessage, headers: [...headers] }, MAX_KEPT_HEAD);
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
