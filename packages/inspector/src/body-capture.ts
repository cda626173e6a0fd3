import { decodeBody } from './body-decoding.js';

const EMPTY = Buffer.alloc(0);

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
 * One body as the inspector keeps it: copies of the first `limit` bytes and the count of all of them.
 * Chunks are copied (the caller's buffers belong to the stream and may be reused) while the budget has
 * room for them; beyond the limit, or once the budget refused, a chunk is only counted.
 */
export class BodyCapture {
  readonly #limit: number;
  readonly #budget: CaptureBudget;
  /** None, one copy (the common case: no array for it), or several; joined into one when first read. */
  #kept: Buffer | Buffer[] | undefined;
  /** The budget refused a copy: the rest is counted only, so what is kept stays a prefix. */
  #full = false;
  /** The decoded body: not tried yet (undefined), does not decode or has no encoding (null), or its bytes. */
  #decoded: Buffer | null | undefined;
  /** Bytes the cached decoded body holds of the budget (given back when its entry leaves the store). */
  #decodedCharge = 0;
  /** Its entry left the store: nothing more is charged to the budget for it. */
  #retired = false;
  captured = 0;
  size = 0;

  constructor(limit: number, budget: CaptureBudget) {
    this.#limit = limit;
    this.#budget = budget;
  }

  add(chunk: Uint8Array): void {
    this.size += chunk.length;
    const room = this.#limit - this.captured;
    if (room <= 0 || this.#full) return;
    const take = Math.min(room, chunk.length);
    if (!this.#budget.reserve(take)) {
      this.#full = true;
      return;
    }
    const copy = Buffer.from(take === chunk.length ? chunk : chunk.subarray(0, take));
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

  /**
   * The body decoded from its Content-Encoding (gzip, br, deflate), or undefined: no encoding, another one,
   * a truncated capture (it would not decode), or more than the body limit once decoded. Tried once: the
   * answer is remembered (the decoded bytes only while the budget has spare room for them).
   */
  decoded(encoding: string | undefined): Buffer | undefined {
    if (this.#decoded !== undefined) return this.#decoded ?? undefined;
    if (encoding === undefined || this.truncated || this.captured === 0) {
      this.#decoded = null;
      return undefined;
    }
    const decoded = decodeBody(this.bytes(), encoding, Math.max(1, this.#limit));
    if (decoded === undefined) this.#decoded = null;
    else if (!this.#retired && this.#budget.reserveSpare(decoded.length)) {
      this.#decoded = decoded;
      this.#decodedCharge = decoded.length;
    }
    return decoded;
  }

  /** The capture ended (its exchange finished): gives back what it reserved for its copies. */
  releaseCopies(): void {
    this.#budget.release(this.captured);
  }

  /** Its entry left the store: the cached decoded body is dropped and its bytes given back. */
  retire(): void {
    this.#retired = true;
    if (this.#decodedCharge > 0) {
      this.#budget.release(this.#decodedCharge);
      this.#decodedCharge = 0;
      this.#decoded = undefined;
    }
  }
}
