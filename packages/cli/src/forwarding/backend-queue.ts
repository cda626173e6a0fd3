import type { Dispatcher } from 'undici';

/**
 * The agent's line in front of its backend pool. undici's pool queues whatever it is handed, and cannot
 * drop a queued request whose public client went away without first opening a connection for it. So a
 * request is handed to the pool only while the pool has a free connection (its last `dispatch()` returned
 * true, or it emitted 'drain' since); the rest wait here, where a cancelled one simply leaves the line.
 * The line is bounded by the session's stream limit: one entry per open stream at most.
 */
export class BackendQueue {
  readonly #pool: Dispatcher;
  /** Insertion-ordered: the first entry is the oldest request. */
  readonly #waiting = new Map<Dispatcher.DispatchHandler, Dispatcher.DispatchOptions>();
  #full = false;

  constructor(pool: Dispatcher) {
    this.#pool = pool;
    pool.on('drain', this.#onDrain);
  }

  /** Requests waiting for a free backend connection. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** Hands the request to the pool now if it has a free connection, else queues it behind the others. */
  dispatch(request: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    if (this.#full || this.#waiting.size > 0) {
      this.#waiting.set(handler, request);
      return;
    }
    this.#full = !this.#pool.dispatch(request, handler);
  }

  /** Takes a request that was not handed to the pool yet out of the line; false when it already was. */
  cancel(handler: Dispatcher.DispatchHandler): boolean {
    return this.#waiting.delete(handler);
  }

  /** Stops listening to the pool (when the pool itself is closed). */
  close(): void {
    this.#pool.off('drain', this.#onDrain);
  }

  readonly #onDrain = (): void => {
    this.#full = false;
    for (const [handler, request] of this.#waiting) {
      if (this.#full) break;
      this.#waiting.delete(handler);
      this.#full = !this.#pool.dispatch(request, handler);
    }
  };
}
