/**
 * Receive-window growth a side may grant beyond its initial windows: one per session, drawing on one
 * shared by every session of the process when there is one (the edge's, across all its agents). A stream
 * takes from it when its window grows and gives back when the window shrinks or the stream closes, so the
 * memory peers may fill is the initial windows plus at most this (see PROTOCOL.md "Receive-window
 * auto-tuning"). Plain counters: taking and giving allocate nothing.
 */
export class WindowBudget {
  readonly limit: number;
  readonly #shared: WindowBudget | undefined;
  #used = 0;

  constructor(limit: number, shared?: WindowBudget) {
    this.limit = limit;
    this.#shared = shared;
  }

  /** Bytes taken and not yet given back. */
  get used(): number {
    return this.#used;
  }

  /** What can still be taken here: what is left of this budget and of the shared one. */
  get available(): number {
    const own = this.limit - this.#used;
    return this.#shared === undefined ? own : Math.min(own, this.#shared.available);
  }

  /** Takes up to `bytes`; returns what was taken (0 when exhausted). */
  take(bytes: number): number {
    const n = Math.max(0, Math.min(bytes, this.available));
    this.#used += n;
    if (this.#shared !== undefined) this.#shared.#used += n;
    return n;
  }

  give(bytes: number): void {
    const n = Math.min(bytes, this.#used);
    this.#used -= n;
    if (this.#shared !== undefined) this.#shared.#used -= n;
  }
}
