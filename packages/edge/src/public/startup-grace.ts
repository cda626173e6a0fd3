/**
 * Requests that may wait at once, across all names, for an agent to claim a name nobody holds during the
 * startup grace. The per-name bound (maxWaitingPerSession) does not bound them: a scan of random names
 * makes one waiter per name. Past it a request gets its 503 at once; each waiter is a request and a timer.
 */
export const MAX_STARTUP_WAITERS = 4_096;

/**
 * The window after the edge starts listening in which a well-formed name nobody holds is more likely an
 * agent still reconnecting to this (re)started edge than a URL that does not exist: a single node with
 * the memory registry forgets every name when it restarts, and a Redis record can have expired during a
 * long outage. Within it such a request waits, bounded in time (reconnectWaitMs) and in number, for an
 * agent to claim the name, and is otherwise answered 503 with Retry-After (refusals.ts agentPending);
 * after it, an unknown name is a prompt 404 again. No list of names is kept across restarts.
 */
export class StartupGrace {
  readonly #graceMs: number;
  readonly #maxWaiting: number;
  /** End of the window (performance clock); 0 until the edge listens. */
  #until = 0;
  #waiting = 0;

  constructor(graceMs: number, maxWaiting = MAX_STARTUP_WAITERS) {
    this.#graceMs = graceMs;
    this.#maxWaiting = maxWaiting;
  }

  /** The edge listens: the window opens now. */
  start(): void {
    this.#until = performance.now() + this.#graceMs;
  }

  /** True while the window is open. */
  get active(): boolean {
    return this.#graceMs > 0 && performance.now() < this.#until;
  }

  /** Requests waiting for a name to be claimed right now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** One more request waits; false (and nothing counted) when the window is closed or the bound is reached. */
  enter(): boolean {
    if (!this.active || this.#waiting >= this.#maxWaiting) return false;
    this.#waiting++;
    return true;
  }

  /** A request that entered stopped waiting (its agent came, its time ran out, or its client left). */
  leave(): void {
    this.#waiting--;
  }
}
