import { EventEmitter } from 'node:events';
import { CapturedEntry, type EntryExtras } from '../entries/captured-entry.js';
import type { StoredEntry } from '../entries/stored-entry.js';
import { InspectorError, InspectorErrorCode } from '../errors.js';
import type { CaptureBudget } from './body-capture.js';
import { EntryArena } from './entry-arena.js';
import { ExchangeSlot } from './exchange-slot.js';

export interface EntryStoreOptions {
  /** All entries together stay within this many bytes (default 64 MiB). */
  budgetBytes?: number;
  /** And this many entries (default 1,000). */
  maxEntries?: number;
}

export const DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_ENTRIES = 1_000;
/** What a slot's numbers take (its share of the preallocated columns), charged with each entry. */
const SLOT_COST = 96;
/** What a kept trailer field costs beside its characters: a V8 string's header and its array slot. */
const FIELD_COST = 24;
/**
 * Free exchange slots kept for reuse (each with its buffers of at most a few KiB): enough for the agent's
 * usual concurrency; past it, a finished exchange's slot is left to the collector.
 */
const MAX_POOLED_SLOTS = 128;

export interface EntryStoreEvents {
  /** A finished exchange was stored (its id: read it with get only when needed). */
  entry: [string];
  clear: [];
  status: [{ paused: boolean }];
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
const FLIGHT = 7; // the slot's sequence number when the exchange opened: its in-flight key
const F64_COLUMNS = 8;
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
 * grow: see BodyCapture) and the decoded bodies cached for reads; a capture growing drops cached decodings,
 * then evicts the oldest entries, and is refused only when the captures running would alone exceed the
 * budget. Entries are numbered when stored, so ids follow the list's order.
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
  /** Bytes held outside them: bodies being captured, and decoded bodies cached for the stored ones. */
  #capturing = 0;
  #decodedBytes = 0;
  #nextId = 1;
  /** Exchanges opened so far: each gets the next number, the key it is listed in flight by. */
  #opened = 0;
  #paused = false;
  /**
   * Exchanges being recorded (an entry is stored only when its exchange ends), newest first: a list linked
   * through their slots, so a request adds no object to it.
   */
  #live: ExchangeSlot | undefined;
  #liveCount = 0;
  /** Slots free for the next exchanges, linked through liveNext. */
  #pool: ExchangeSlot | undefined;
  #pooled = 0;

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
    return this.#bytes + this.#capturing + this.#decodedBytes;
  }

  /**
   * A slot for an exchange that starts now, from the pool when one is free, numbered, and listed as in
   * flight until it ends (all of them: the list is linked through the slots, so it costs nothing to grow).
   */
  openSlot(bodyLimit: number, kind: 'http' | 'websocket'): ExchangeSlot {
    let slot = this.#pool;
    if (slot === undefined) slot = new ExchangeSlot(this);
    else {
      this.#pool = slot.liveNext;
      slot.liveNext = undefined;
      this.#pooled--;
    }
    slot.open(bodyLimit, kind, ++this.#opened);
    const head = this.#live;
    slot.liveNext = head;
    if (head !== undefined) head.livePrev = slot;
    this.#live = slot;
    this.#liveCount++;
    return slot;
  }

  #ended(slot: ExchangeSlot): void {
    const { livePrev: prev, liveNext: next } = slot;
    if (prev === undefined) this.#live = next;
    else prev.liveNext = next;
    if (next !== undefined) next.livePrev = prev;
    slot.livePrev = undefined;
    slot.liveNext = undefined;
    this.#liveCount--;
  }

  /** The slot's exchange is stored: the slot is emptied and kept for the next one. */
  #recycle(slot: ExchangeSlot): void {
    slot.close();
    if (this.#pooled >= MAX_POOLED_SLOTS) return;
    slot.liveNext = this.#pool;
    this.#pool = slot;
    this.#pooled++;
  }

  /** The newest `limit` exchanges still running (a long poll, an SSE stream, a WebSocket), newest first. */
  inFlight(limit: number): ExchangeSlot[] {
    const out: ExchangeSlot[] = [];
    for (let r = this.#live; r !== undefined && out.length < limit; r = r.liveNext) out.push(r);
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
    // Only the captures running are never evicted for: entries and cached decodings give way to them.
    if (this.#capturing + bytes > this.budgetBytes) return false;
    this.#makeRoom(bytes, 0);
    this.#capturing += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#capturing -= bytes;
  }

  /**
   * Until `extra` more bytes fit: drops cached decodings (a cache: they are decoded again when read), oldest
   * first, then evicts the oldest entries while more than `keep` are stored.
   */
  #makeRoom(extra: number, keep: number): void {
    const room = this.budgetBytes - extra;
    if (this.bytes <= room) return;
    for (const [key, decoded] of this.#decoded) {
      if (this.bytes <= room) return;
      if (decoded === null) continue;
      this.#decodedBytes -= decoded.length;
      this.#decoded.delete(key);
    }
    while (this.bytes > room && this.#count > keep && this.#evictOldest()) {}
  }

  /**
   * Stores a finished exchange, numbering it now, and returns its id; its slot goes back to the pool. One
   * larger than the whole budget is numbered but not kept (its bodies were reserved as they grew, so only
   * its heads or trailers can make it so). Its bytes (heads, then bodies) are copied into the arena, one place for the
   * whole entry, and what the bodies held of the budget is released.
   */
  add(done: ExchangeSlot): string {
    this.#ended(done);
    const id = this.#nextId++;
    const { request, response } = done;
    const requestHead = done.requestHeadLength;
    const responseHead = done.responseHeadLength;
    const requestCaptured = request.captured;
    const responseCaptured = response.captured;
    const size = requestHead + responseHead + requestCaptured + responseCaptured;
    // Trailers are kept beside the arena (with the extras): their strings count against the budget too,
    // and a set larger than the whole budget (a hostile backend's) leaves its entry out like a huge head.
    let trailerChars = 0;
    for (const field of done.extras?.trailers ?? []) trailerChars += field.length + FIELD_COST;
    if (size + SLOT_COST + trailerChars > this.budgetBytes) {
      this.#recycle(done);
      return String(id);
    }
    const offset = this.#arena.alloc(size);
    const chunk = this.#arena.placed;
    let o = offset + done.heads.copy(chunk, offset, 0, requestHead + responseHead);
    o += request.copyTo(chunk, o);
    response.copyTo(chunk, o);
    if (this.#count === this.maxEntries) this.#evictOldest();
    const slot = (this.#first + this.#count) % this.maxEntries;
    this.#count++;
    const cost = size + this.#arena.wasted + SLOT_COST + trailerChars;
    const f = slot * F64_COLUMNS;
    const f64 = this.#f64;
    f64[f + ID] = id;
    // One clock read per event: the wall-clock start is the monotonic one placed on the epoch.
    f64[f + STARTED] = Math.round(performance.timeOrigin + done.started);
    f64[f + DURATION] = done.durationMs;
    f64[f + TTFB] = Number.isNaN(done.ttfb) ? Number.NaN : Math.round(done.ttfb * 100) / 100;
    f64[f + REQUEST_SIZE] = request.size;
    f64[f + RESPONSE_SIZE] = response.size;
    f64[f + COST] = cost;
    f64[f + FLIGHT] = done.seq;
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
    this.#recycle(done);
    this.#bytes += cost;
    this.#makeRoom(0, 1);
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
    if (decoded !== null) this.#decodedBytes -= decoded.length;
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
      flightSeq: f64[f + FLIGHT]!,
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
    if (decoded !== null) {
      if (this.bytes + decoded.length > this.budgetBytes) return;
      this.#decodedBytes += decoded.length;
    }
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

  /**
   * The ids stored, oldest first: what a long read (a HAR export, a body search) walks, looking each one up
   * when its turn comes, so it holds no snapshot (and no evicted entry's bytes) meanwhile.
   */
  ids(): string[] {
    const out: string[] = [];
    for (let i = 0; i < this.#count; i++) {
      out.push(String(this.#f64[((this.#first + i) % this.maxEntries) * F64_COLUMNS + ID]!));
    }
    return out;
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
