import { EventEmitter } from 'node:events';
import type { BodyCapture, CaptureBudget } from './body-capture.js';
import type { ExchangeRecorder } from './capture.js';
import { CapturedEntry, type EntryExtras } from './captured-entry.js';
import { EntryArena } from './entry-arena.js';
import { InspectorError, InspectorErrorCode } from './errors.js';
import type { StoredEntry } from './stored-entry.js';

export interface EntryStoreOptions {
  /** All entries together stay within this many bytes (default 64 MiB). */
  budgetBytes?: number;
  /** And this many entries (default 1,000). */
  maxEntries?: number;
}

export const DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_ENTRIES = 1_000;
/** Exchanges listed while they run; past this many (the agent's own limits come first) the rest are not. */
export const MAX_IN_FLIGHT = 4_096;
/** What a slot's numbers take (its share of the preallocated columns), charged with each entry. */
const SLOT_COST = 96;

export interface EntryStoreEvents {
  /** A finished exchange was stored (its id: read it with get only when needed). */
  entry: [string];
  clear: [];
  status: [{ paused: boolean }];
}

/** A finished exchange as the recorder hands it over: heads in the protocol's encoding, bodies as captured. */
export interface FinishedExchange {
  startedAt: number;
  durationMs: number;
  ttfbMs: number | null;
  status: number;
  kind: 'http' | 'websocket';
  /** A request-head payload as the protocol encodes it (method, target, headers). */
  requestHeadBytes: Uint8Array;
  /** A response-head payload as the protocol encodes it; none when no final head came. */
  responseHeadBytes: Uint8Array | undefined;
  /** None when the body had no byte. */
  request: BodyCapture | undefined;
  response: BodyCapture | undefined;
  /** The fields most exchanges do not have (error, replay, client, WebSocket traffic). */
  extras: EntryExtras | undefined;
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InspectorError(InspectorErrorCode.INVALID_OPTION, `${name} must be a positive integer`);
  }
  return value;
}

// Columns of a slot: numbers in typed arrays, so a kept entry is no object the collector has to trace.
const ID = 0;
const STARTED = 1;
const DURATION = 2;
const TTFB = 3; // NaN: no response head
const REQUEST_SIZE = 4;
const RESPONSE_SIZE = 5;
const COST = 6;
const F64_COLUMNS = 7;
const STATUS = 0;
const OFFSET = 1;
const REQUEST_HEAD = 2;
const RESPONSE_HEAD = 3; // 0: none
const REQUEST_CAPTURED = 4;
const RESPONSE_CAPTURED = 5;
const FLAGS = 6;
const U32_COLUMNS = 7;
const WEBSOCKET = 1;
const HAS_EXTRAS = 2;

/**
 * The captured entries, oldest first, within a byte budget and a count cap: adding one evicts the oldest
 * until both hold. An entry is a slot of a ring (its numbers in typed arrays) and a place in the arena (its
 * heads and bodies); its rare fields live in a side map. Entries are read as CapturedEntry snapshots built
 * when asked for. The budget also covers the bodies of exchanges still being captured (reserved as they
 * grow: see BodyCapture) and the decoded bodies cached for reads. Entries are numbered when stored, so ids
 * follow the list's order.
 */
export class EntryStore extends EventEmitter<EntryStoreEvents> implements CaptureBudget {
  readonly budgetBytes: number;
  readonly maxEntries: number;
  /** Decoded bodies (gzip, br, deflate) are kept only up to this size (the capture sets its body limit). */
  decodeLimit = 1024 * 1024;
  readonly #f64: Float64Array;
  readonly #u32: Uint32Array;
  readonly #chunks: (Buffer | undefined)[];
  readonly #extras = new Map<number, EntryExtras>();
  /** Decoded bodies kept for reads, by id * 2 + (0 request, 1 response); null: does not decode. */
  readonly #decoded = new Map<number, Buffer | null>();
  readonly #arena = new EntryArena();
  /** Slot of the oldest entry, and how many there are. */
  #first = 0;
  #count = 0;
  /** What the stored entries cost. */
  #bytes = 0;
  /** Bytes held outside them: bodies being captured, decoded bodies cached for the stored ones. */
  #reserved = 0;
  #nextId = 1;
  #paused = false;
  /**
   * Exchanges being recorded (an entry is stored only when its exchange ends), newest first: a list linked
   * through the recorders themselves, so a request adds no object to it.
   */
  #live: ExchangeRecorder | undefined;
  #liveCount = 0;

  constructor(options: EntryStoreOptions = {}) {
    super();
    this.budgetBytes = positiveInteger('budget', options.budgetBytes, DEFAULT_BUDGET_BYTES);
    this.maxEntries = positiveInteger('max entries', options.maxEntries, DEFAULT_MAX_ENTRIES);
    this.#f64 = new Float64Array(this.maxEntries * F64_COLUMNS);
    this.#u32 = new Uint32Array(this.maxEntries * U32_COLUMNS);
    this.#chunks = new Array<Buffer | undefined>(this.maxEntries).fill(undefined);
  }

  get paused(): boolean {
    return this.#paused;
  }

  get count(): number {
    return this.#count;
  }

  /** Bytes held: the stored entries and what is reserved beside them. */
  get bytes(): number {
    return this.#bytes + this.#reserved;
  }

  /** A recorder started: listed as in flight until it ends (past MAX_IN_FLIGHT, it is not listed). */
  began(recorder: ExchangeRecorder): void {
    if (this.#liveCount >= MAX_IN_FLIGHT) return;
    const head = this.#live;
    recorder.liveNext = head;
    if (head !== undefined) head.livePrev = recorder;
    this.#live = recorder;
    this.#liveCount++;
  }

  ended(recorder: ExchangeRecorder): void {
    const { livePrev: prev, liveNext: next } = recorder;
    if (prev === undefined && this.#live !== recorder) return; // never listed
    if (prev === undefined) this.#live = next;
    else prev.liveNext = next;
    if (next !== undefined) next.livePrev = prev;
    recorder.livePrev = undefined;
    recorder.liveNext = undefined;
    this.#liveCount--;
  }

  /** Exchanges still running (a long poll, an SSE stream, a WebSocket), newest first. */
  inFlight(): ExchangeRecorder[] {
    const out: ExchangeRecorder[] = [];
    for (let r = this.#live; r !== undefined; r = r.liveNext) out.push(r);
    return out;
  }

  get inFlightCount(): number {
    return this.#liveCount;
  }

  setPaused(paused: boolean): void {
    if (this.#paused === paused) return;
    this.#paused = paused;
    this.emit('status', { paused });
  }

  reserve(bytes: number): boolean {
    // Entries are evicted only when that makes room: what is being captured is never evicted for.
    if (this.#reserved + bytes > this.budgetBytes) return false;
    while (this.#bytes + this.#reserved + bytes > this.budgetBytes && this.#evictOldest()) {}
    this.#reserved += bytes;
    return true;
  }

  reserveSpare(bytes: number): boolean {
    if (this.#bytes + this.#reserved + bytes > this.budgetBytes) return false;
    this.#reserved += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#reserved -= bytes;
  }

  /**
   * Stores a finished exchange, numbering it now, and returns its id. One larger than the whole budget is
   * numbered but not kept (its bodies were reserved as they grew, so only its heads can make it so). Its
   * bodies' captures are released: their bytes are copied into the arena, one place for the whole entry.
   */
  add(done: FinishedExchange): string {
    const id = this.#nextId++;
    const { request, response } = done;
    const requestHeadBytes = done.requestHeadBytes;
    const responseHeadBytes = done.responseHeadBytes;
    const requestHead = requestHeadBytes.length;
    const responseHead = responseHeadBytes?.length ?? 0;
    const requestCaptured = request?.captured ?? 0;
    const responseCaptured = response?.captured ?? 0;
    const size = requestHead + responseHead + requestCaptured + responseCaptured;
    if (size + SLOT_COST > this.budgetBytes) {
      request?.release();
      response?.release();
      return String(id);
    }
    const offset = this.#arena.alloc(size);
    const chunk = this.#arena.placed;
    let o = offset;
    chunk.set(requestHeadBytes, o);
    o += requestHead;
    if (responseHeadBytes !== undefined) chunk.set(responseHeadBytes, o);
    o += responseHead;
    if (request !== undefined) o += request.copyTo(chunk, o);
    if (response !== undefined) response.copyTo(chunk, o);
    request?.release();
    response?.release();
    if (this.#count === this.maxEntries) this.#evictOldest();
    const slot = (this.#first + this.#count) % this.maxEntries;
    this.#count++;
    const cost = size + this.#arena.wasted + SLOT_COST;
    const f = slot * F64_COLUMNS;
    const f64 = this.#f64;
    f64[f + ID] = id;
    f64[f + STARTED] = done.startedAt;
    f64[f + DURATION] = done.durationMs;
    f64[f + TTFB] = done.ttfbMs ?? Number.NaN;
    f64[f + REQUEST_SIZE] = request?.size ?? 0;
    f64[f + RESPONSE_SIZE] = response?.size ?? 0;
    f64[f + COST] = cost;
    const u = slot * U32_COLUMNS;
    const u32 = this.#u32;
    const extras = done.extras;
    u32[u + STATUS] = done.status;
    u32[u + OFFSET] = offset;
    u32[u + REQUEST_HEAD] = requestHead;
    u32[u + RESPONSE_HEAD] = responseHead;
    u32[u + REQUEST_CAPTURED] = requestCaptured;
    u32[u + RESPONSE_CAPTURED] = responseCaptured;
    u32[u + FLAGS] = (done.kind === 'websocket' ? WEBSOCKET : 0) | (extras === undefined ? 0 : HAS_EXTRAS);
    if (extras !== undefined) this.#extras.set(id, extras);
    this.#chunks[slot] = chunk;
    this.#bytes += cost;
    while (this.#bytes + this.#reserved > this.budgetBytes && this.#count > 1 && this.#evictOldest()) {}
    const key = String(id);
    // Only a page listening is told (see createInspector): with none, storing costs no event.
    if (this.listenerCount('entry') > 0) this.emit('entry', key);
    return key;
  }

  #evictOldest(): boolean {
    if (this.#count === 0) return false;
    const slot = this.#first;
    const id = this.#f64[slot * F64_COLUMNS + ID]!;
    this.#bytes -= this.#f64[slot * F64_COLUMNS + COST]!;
    this.#chunks[slot] = undefined;
    if ((this.#u32[slot * U32_COLUMNS + FLAGS]! & HAS_EXTRAS) !== 0) this.#extras.delete(id);
    if (this.#decoded.size > 0) {
      this.#forgetDecoded(id * 2);
      this.#forgetDecoded(id * 2 + 1);
    }
    this.#first = (slot + 1) % this.maxEntries;
    this.#count--;
    return true;
  }

  #forgetDecoded(key: number): void {
    const decoded = this.#decoded.get(key);
    if (decoded === undefined) return;
    if (decoded !== null) this.#reserved -= decoded.length;
    this.#decoded.delete(key);
  }

  /** The slot holding `id`, or -1 (ids grow along the ring: a binary search). */
  #slotOf(id: number): number {
    let lo = 0;
    let hi = this.#count - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const slot = (this.#first + mid) % this.maxEntries;
      const at = this.#f64[slot * F64_COLUMNS + ID]!;
      if (at === id) return slot;
      if (at < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  #snapshot(slot: number): CapturedEntry {
    const f = slot * F64_COLUMNS;
    const u = slot * U32_COLUMNS;
    const f64 = this.#f64;
    const u32 = this.#u32;
    const id = f64[f + ID]!;
    const flags = u32[u + FLAGS]!;
    const ttfb = f64[f + TTFB]!;
    return new CapturedEntry(this, {
      id,
      startedAt: f64[f + STARTED]!,
      durationMs: f64[f + DURATION]!,
      ttfbMs: Number.isNaN(ttfb) ? null : ttfb,
      status: u32[u + STATUS]!,
      kind: (flags & WEBSOCKET) !== 0 ? 'websocket' : 'http',
      chunk: this.#chunks[slot]!,
      offset: u32[u + OFFSET]!,
      requestHead: u32[u + REQUEST_HEAD]!,
      responseHead: u32[u + RESPONSE_HEAD]!,
      requestCaptured: u32[u + REQUEST_CAPTURED]!,
      responseCaptured: u32[u + RESPONSE_CAPTURED]!,
      requestSize: f64[f + REQUEST_SIZE]!,
      responseSize: f64[f + RESPONSE_SIZE]!,
      cost: f64[f + COST]!,
      extras: (flags & HAS_EXTRAS) !== 0 ? this.#extras.get(id) : undefined,
    });
  }

  /**
   * A body's decoding as cached for reads: undefined when not tried (or tried but not kept for want of
   * room), null when it does not decode.
   */
  cachedDecoding(id: number, side: 0 | 1): Buffer | null | undefined {
    return this.#decoded.get(id * 2 + side);
  }

  /** Remembers a decoding while its entry is stored and the budget has spare room for its bytes. */
  cacheDecoding(id: number, side: 0 | 1, decoded: Buffer | null): void {
    if (this.#slotOf(id) < 0) return;
    if (decoded !== null && !this.reserveSpare(decoded.length)) return;
    this.#decoded.set(id * 2 + side, decoded);
  }

  get(id: string): StoredEntry | undefined {
    const n = Number(id);
    if (!Number.isSafeInteger(n)) return undefined;
    const slot = this.#slotOf(n);
    return slot < 0 ? undefined : this.#snapshot(slot);
  }

  /**
   * Newest first, as snapshots (an entry evicted later stays readable through its snapshot). Read it in one
   * go: the ring moves when entries are added or evicted between two steps.
   */
  *newestFirst(): Generator<StoredEntry> {
    for (let i = this.#count - 1; i >= 0; i--) yield this.#snapshot((this.#first + i) % this.maxEntries);
  }

  all(): StoredEntry[] {
    const out: StoredEntry[] = [];
    for (let i = 0; i < this.#count; i++) out.push(this.#snapshot((this.#first + i) % this.maxEntries));
    return out;
  }

  clear(): void {
    while (this.#evictOldest()) {}
    this.#arena.reset();
    this.emit('clear');
  }
}
