const EMPTY = Buffer.alloc(0);

/**
 * One body as the inspector keeps it: copies of the first `limit` bytes and the count of all of them.
 * Chunks are copied (the caller's buffers belong to the stream and may be reused); beyond the limit a
 * chunk is only counted.
 */
export class BodyCapture {
  readonly #limit: number;
  /** None, one copy (the common case: no array for it), or several; joined into one when first read. */
  #kept: Buffer | Buffer[] | undefined;
  captured = 0;
  size = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  add(chunk: Uint8Array): void {
    this.size += chunk.length;
    const room = this.#limit - this.captured;
    if (room <= 0) return;
    const copy = Buffer.from(chunk.length <= room ? chunk : chunk.subarray(0, room));
    const kept = this.#kept;
    if (kept === undefined) this.#kept = copy;
    else if (Array.isArray(kept)) kept.push(copy);
    else this.#kept = [kept, copy];
    this.captured += copy.length;
  }

  get truncated(): boolean {
    return this.size > this.captured;
  }

  bytes(): Buffer {
    const kept = this.#kept;
    if (kept === undefined) return EMPTY;
    if (!Array.isArray(kept)) return kept;
    // Joined once, kept joined: later reads (the API, search) do not concatenate again.
    const whole = Buffer.concat(kept, this.captured);
    this.#kept = whole;
    return whole;
  }
}

/** A body given whole (a replay's request): kept up to the limit like a streamed one. */
export function captureWhole(body: Uint8Array, limit: number): BodyCapture {
  const capture = new BodyCapture(limit);
  if (body.length > 0) capture.add(body);
  return capture;
}
