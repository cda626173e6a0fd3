/**
 * Receive-window growth a side may grant beyond its initial windows: one per session, drawing on one
 * shared by every session of the process when there is one (the edge's, across all its agents). A stream
 * takes from it when its window grows and gives back when the window shrinks or the stream closes, so the
 * memory peers may fill is the initial windows plus at most this (see PROTOCOL.md "Receive-window
 * auto-tuning"). A budget may draw on several others at once (a node link's stream: its tenants' shares
 * and the link's budget), each bounding it; taking charges every one of them, and theirs in turn, once.
 * Plain counters: taking and giving allocate nothing.
 */
export class WindowBudget {
  readonly limit: number;
  readonly #shared: readonly WindowBudget[];
  #used = 0;

  constructor(limit: number, shared?: WindowBudget | readonly WindowBudget[]) {
    this.limit = limit;
    this.#shared = shared === undefined ? [] : shared instanceof WindowBudget ? [shared] : shared;
  }

  /** Bytes taken and not yet given back. */
  get used(): number {
    return this.#used;
  }

  /** What can still be taken here: what is left of this budget and of every one it draws on. */
  get available(): number {
    let left = this.limit - this.#used;
    for (const shared of this.#shared) left = Math.min(left, shared.available);
    return left;
  }

  /** Takes up to `bytes`; returns what was taken (0 when exhausted). */
  take(bytes: number): number {
    const n = Math.max(0, Math.min(bytes, this.available));
    this.#charge(n);
    return n;
  }

  give(bytes: number): void {
    this.#charge(-Math.min(bytes, this.#used));
  }

  #charge(n: number): void {
    this.#used += n;
    for (const shared of this.#shared) shared.#charge(n);
  }
}
