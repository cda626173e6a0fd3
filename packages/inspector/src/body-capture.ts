/**
 * Where captured bytes are counted while their exchange runs (the store: its budget covers the entries
 * kept and the bodies still being captured).
 */
export interface CaptureBudget {
  /** Room for `bytes` more, evicting the oldest entries if needed; false when even that is not enough. */
  reserve(bytes: number): boolean;
  /** Room for `bytes` more only if it is free now (nothing is evicted for it). */
  reserveSpare(bytes: number): boolean;
  release(bytes: number): void;
}

/**
 * One body while its exchange runs: a copy of its first `limit` bytes, appended into one buffer that grows
 * by doubling (no array of slices, no object per chunk), and the count of all of them. The caller's chunks
 * belong to the stream and may be reused, so they are copied; the buffer's whole capacity holds the budget.
 * Beyond the limit, or once the budget refused to grow, chunks are only counted: what is kept stays a prefix.
 */
export class BodyCapture {
  readonly #limit: number;
  readonly #budget: CaptureBudget;
  #buffer: Buffer | undefined;
  /** The budget refused room: the rest is counted only. */
  #full = false;
  captured = 0;
  size = 0;

  constructor(limit: number, budget: CaptureBudget) {
    this.#limit = limit;
    this.#budget = budget;
  }

  add(chunk: Uint8Array): void {
    this.size += chunk.length;
    const take = Math.min(this.#limit - this.captured, chunk.length);
    if (take <= 0 || this.#full) return;
    const need = this.captured + take;
    let buffer = this.#buffer;
    if (buffer === undefined || need > buffer.length) {
      // The first chunk is taken at its size (most bodies are one chunk); later ones double the room.
      const capacity = buffer === undefined ? need : Math.min(this.#limit, Math.max(need, buffer.length * 2));
      const grown = capacity - (buffer?.length ?? 0);
      if (!this.#budget.reserve(grown)) {
        this.#full = true;
        return;
      }
      const next = Buffer.allocUnsafe(capacity);
      if (buffer !== undefined) buffer.copy(next, 0, 0, this.captured);
      buffer = next;
      this.#buffer = buffer;
    }
    buffer.set(take === chunk.length ? chunk : chunk.subarray(0, take), this.captured);
    this.captured = need;
  }

  /** Copies the bytes kept into `target` at `offset` (no view made); returns how many. */
  copyTo(target: Buffer, offset: number): number {
    return this.#buffer === undefined ? 0 : this.#buffer.copy(target, offset, 0, this.captured);
  }

  /** The capture ended (its bytes were copied into the store): gives back what it held of the budget. */
  release(): void {
    this.#budget.release(this.#buffer?.length ?? 0);
    this.#buffer = undefined;
  }
}
