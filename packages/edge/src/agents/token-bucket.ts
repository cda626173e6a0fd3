/**
 * A per-session request rate limit. Tokens are refilled lazily from the clock on each `take()`, so a
 * request costs two numbers' arithmetic: no timer, no allocation.
 */
export class TokenBucket {
  readonly #ratePerMs: number;
  readonly #rate: number;
  readonly #burst: number;
  #tokens: number;
  #last: number;

  /** `rate` tokens per second, at most `burst` saved up; the bucket starts full. */
  constructor(rate: number, burst: number, now: number = performance.now()) {
    this.#rate = rate;
    this.#ratePerMs = rate / 1000;
    this.#burst = burst;
    this.#tokens = burst;
    this.#last = now;
  }

  /** Takes one token: 0 when granted, otherwise the whole seconds until one is available (Retry-After). */
  take(now: number = performance.now()): number {
    const elapsed = now - this.#last;
    if (elapsed > 0) {
      this.#tokens = Math.min(this.#burst, this.#tokens + elapsed * this.#ratePerMs);
      this.#last = now;
    }
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - this.#tokens) / this.#rate));
  }
}
