/**
 * One body as the inspector keeps it: copies of the first `limit` bytes and the count of all of them.
 * Chunks are copied (the caller's buffers belong to the stream and may be reused); beyond the limit a
 * chunk is only counted.
 */
export class BodyCapture {
  readonly #limit: number;
  readonly chunks: Buffer[] = [];
  captured = 0;
  size = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  add(chunk: Uint8Array): void {
    this.size += chunk.length;
    const room = this.#limit - this.captured;
    if (room <= 0) return;
    const kept = Buffer.from(chunk.length <= room ? chunk : chunk.subarray(0, room));
    this.chunks.push(kept);
    this.captured += kept.length;
  }

  get truncated(): boolean {
    return this.size > this.captured;
  }

  bytes(): Buffer {
    if (this.chunks.length === 1) return this.chunks[0]!;
    const whole = Buffer.concat(this.chunks, this.captured);
    // Joined once, kept joined: later reads (the API, search) do not concatenate again.
    this.chunks.length = 0;
    if (whole.length > 0) this.chunks.push(whole);
    return whole;
  }
}

/** A body given whole (a replay's request): kept up to the limit like a streamed one. */
export function captureWhole(body: Uint8Array, limit: number): BodyCapture {
  const capture = new BodyCapture(limit);
  if (body.length > 0) capture.add(body);
  return capture;
}
