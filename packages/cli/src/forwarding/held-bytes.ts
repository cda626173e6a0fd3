/**
 * Bytes kept for later in one buffer of their own. A chunk handed in is copied, not kept: a stream's DATA
 * is a view into the session's socket read, and keeping the view keeps the whole read (a byte held per
 * read of ~48 KiB made 2,000 held bytes cost 95 MiB). Grows by doubling: at most twice what it holds.
 */
export class HeldBytes {
  #buffer: Buffer | undefined;
  #length = 0;

  /** Bytes held. */
  get length(): number {
    return this.#length;
  }

  push(chunk: Buffer): void {
    const need = this.#length + chunk.length;
    const buffer = this.#buffer;
    if (buffer === undefined || need > buffer.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, 2 * (buffer?.length ?? 0), 1024));
      buffer?.copy(grown, 0, 0, this.#length);
      this.#buffer = grown;
    }
    chunk.copy(this.#buffer!, this.#length);
    this.#length = need;
  }

  /** Everything held, in order; empty afterwards. */
  take(): Buffer {
    const out = this.#buffer?.subarray(0, this.#length) ?? Buffer.alloc(0);
    this.#buffer = undefined;
    this.#length = 0;
    return out;
  }
}
