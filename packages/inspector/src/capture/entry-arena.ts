/** Entries are appended into shared chunks of this size; one larger than a quarter of it gets its own. */
export const ARENA_CHUNK_BYTES = 256 * 1024;
const OWN_CHUNK_ABOVE = ARENA_CHUNK_BYTES / 4;

/**
 * The bytes of the stored entries (heads and bodies), appended one entry after the other into large chunks.
 * A kept entry is then a place in a chunk rather than buffers of its own: what the store keeps per entry is
 * numbers, and the garbage collector sees one object per 256 KiB instead of several per request. Bytes are
 * never overwritten (views handed to the API stay valid); a chunk is freed by the collector once no entry
 * (and no view) points into it, which for a store evicting oldest first is in the order they were filled.
 */
export class EntryArena {
  #chunk: Buffer | undefined;
  #used = 0;
  /** The chunk the last `alloc` placed its bytes in. */
  placed: Buffer = Buffer.alloc(0);
  /** Bytes the last `alloc` left unused at the end of the previous chunk (charged to the entry that did). */
  wasted = 0;

  /** Room for `size` contiguous bytes: returns their offset in `placed`. */
  alloc(size: number): number {
    this.wasted = 0;
    if (size > OWN_CHUNK_ABOVE) {
      this.placed = Buffer.allocUnsafeSlow(size);
      return 0;
    }
    let chunk = this.#chunk;
    if (chunk === undefined || this.#used + size > chunk.length) {
      if (chunk !== undefined) this.wasted = chunk.length - this.#used;
      // Not from Buffer's shared pool: a pool slab kept by one entry would keep everything else in it.
      chunk = Buffer.allocUnsafeSlow(ARENA_CHUNK_BYTES);
      this.#chunk = chunk;
      this.#used = 0;
    }
    const offset = this.#used;
    this.#used += size;
    this.placed = chunk;
    return offset;
  }

  /** Starts the next entry in a fresh chunk (after a clear: the old ones go with their entries). */
  reset(): void {
    this.#chunk = undefined;
    this.#used = 0;
    this.placed = Buffer.alloc(0);
  }
}
