/**
 * Where captured bytes are counted while their exchange runs (the store: its budget covers the entries
 * kept and the bodies still being captured).
 */
export interface CaptureBudget {
  /**
   * Room for `bytes` more, dropping cached decodings and evicting the oldest entries if needed; false when
   * the bodies being captured would alone exceed the budget.
   */
  reserve(bytes: number): boolean;
  release(bytes: number): void;
}

/** A body buffer larger than this is not kept for the next exchange of the slot. */
const KEPT_BUFFER_BYTES = 4 * 1024;
/** The smallest buffer made: bodies of a few bytes to a few hundred then reuse one. */
const MIN_BUFFER_BYTES = 512;

/**
 * One body while its exchange runs: a copy of its first `limit` bytes, appended into one buffer (no array of
 * slices, no object per chunk), and the count of all of them. The caller's chunks belong to the stream and
 * may be reused, so they are copied. The budget holds the body's capacity as it would grow by doubling from
 * its first chunk's size; the buffer itself belongs to the capture's slot and is reused by its next exchange
 * when small (see ExchangeSlot), so a small body allocates nothing. Beyond the limit, or once the budget
 * refused to grow, chunks are only counted: what is kept stays a prefix.
 */
export class BodyCapture {
  #limit: number;
  readonly #budget: CaptureBudget;
  #buffer: Buffer | undefined;
  /** What the budget holds for this body (its buffer may be larger, kept from an earlier exchange). */
  #capacity = 0;
  /** The budget refused room: the rest is counted only. */
  #full = false;
  captured = 0;
  size = 0;

  constructor(limit: number, budget: CaptureBudget) {
    this.#limit = limit;
    this.#budget = budget;
  }

  /** Ready for the next exchange's body (after release). */
  reset(limit: number): void {
    this.#limit = limit;
    this.#full = false;
    this.captured = 0;
    this.size = 0;
  }

  add(chunk: Uint8Array): void {
    this.size += chunk.length;
    const take = Math.min(this.#limit - this.captured, chunk.length);
    if (take <= 0 || this.#full) return;
    const need = this.captured + take;
    if (need > this.#capacity) {
      // The first chunk is taken at its size (most bodies are one chunk); later ones double the room.
      const capacity =
        this.#capacity === 0 ? need : Math.min(this.#limit, Math.max(need, this.#capacity * 2));
      if (!this.#budget.reserve(capacity - this.#capacity)) {
        this.#full = true;
        return;
      }
      this.#capacity = capacity;
      const buffer = this.#buffer;
      if (buffer === undefined || capacity > buffer.length) {
        // Not from Buffer's shared pool: a slab kept by a reused slot would keep everything else in it.
        const next = Buffer.allocUnsafeSlow(Math.max(capacity, MIN_BUFFER_BYTES));
        if (buffer !== undefined) buffer.copy(next, 0, 0, this.captured);
        this.#buffer = next;
      }
    }
    this.#buffer!.set(take === chunk.length ? chunk : chunk.subarray(0, take), this.captured);
    this.captured = need;
  }

  /** Copies the bytes kept into `target` at `offset` (no view made); returns how many. */
  copyTo(target: Buffer, offset: number): number {
    return this.#buffer === undefined ? 0 : this.#buffer.copy(target, offset, 0, this.captured);
  }

  /** The capture ended (its bytes were copied into the store): gives back what it held of the budget. */
  release(): void {
    this.#budget.release(this.#capacity);
    this.#capacity = 0;
    this.#full = true;
    if (this.#buffer !== undefined && this.#buffer.length > KEPT_BUFFER_BYTES) this.#buffer = undefined;
  }
}
