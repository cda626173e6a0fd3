/**
 * When a worker that died may be started again: at once the first time, then after a delay that doubles
 * with each death within the window (100 ms up to 5 s), and not at all past `maxPerWindow` deaths in the
 * window (a worker that cannot stay up: the primary stops rather than spin, as a supervisor would).
 */
export class RestartBudget {
  readonly #deaths: number[] = [];
  readonly #maxPerWindow: number;
  readonly #windowMs: number;
  readonly #now: () => number;

  constructor(maxPerWindow: number, windowMs = 60_000, now: () => number = Date.now) {
    this.#maxPerWindow = maxPerWindow;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** Records a death; the delay before the restart, or undefined when the budget is spent. */
  nextDelay(): number | undefined {
    const now = this.#now();
    this.#deaths.push(now);
    while (this.#deaths.length > 0 && (this.#deaths[0] ?? now) <= now - this.#windowMs) this.#deaths.shift();
    const recent = this.#deaths.length;
    if (recent > this.#maxPerWindow) return undefined;
    return recent <= 1 ? 0 : Math.min(5_000, 100 * 2 ** (recent - 2));
  }
}
