/** One-second buckets over a minute: a request costs one increment, a reading sums 60 numbers. */
const BUCKETS = 60;
const BUCKET_MS = 1_000;

/**
 * Events in the last minute, as a sliding window of one-second buckets. Counting is O(1) and allocates
 * nothing (it runs once per request); only a reading, a few times a second at most, walks the buckets.
 * The clock is injected so tests can move time.
 */
export class RateWindow {
  readonly #counts = new Uint32Array(BUCKETS);
  readonly #now: () => number;
  /** The second (clock ms / 1000, floored) the newest bucket counts. */
  #second: number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
    this.#second = Math.floor(now() / BUCKET_MS);
  }

  /** One event now. */
  hit(): void {
    this.#advance();
    const slot = this.#second % BUCKETS;
    this.#counts[slot] = (this.#counts[slot] ?? 0) + 1;
  }

  /** Events in the last 60 seconds. */
  perMinute(): number {
    this.#advance();
    let sum = 0;
    for (const count of this.#counts) sum += count;
    return sum;
  }

  /** Empties the buckets of the seconds that went by since the last event or reading (60 at most). */
  #advance(): void {
    const second = Math.floor(this.#now() / BUCKET_MS);
    // A clock that went back (an injected one, or a wall clock set back) starts over from here.
    if (second < this.#second) {
      this.#counts.fill(0);
      this.#second = second;
      return;
    }
    const gone = Math.min(second - this.#second, BUCKETS);
    for (let i = 1; i <= gone; i++) this.#counts[(this.#second + i) % BUCKETS] = 0;
    this.#second = second;
  }
}
