/** Counts requests being carried through tunnels, so a drain can wait for the count to reach zero. */
export class InFlight {
  #count = 0;
  #idleWaiters: (() => void)[] = [];

  get count(): number {
    return this.#count;
  }

  start(): void {
    this.#count++;
  }

  finish(): void {
    this.#count--;
    if (this.#count === 0 && this.#idleWaiters.length > 0) {
      for (const wake of this.#idleWaiters.splice(0)) wake();
    }
  }

  /** Resolves when nothing is in flight, or after `timeoutMs`; true if it reached zero. */
  idle(timeoutMs: number): Promise<boolean> {
    if (this.#count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#idleWaiters = this.#idleWaiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.#idleWaiters.push(wake);
    });
  }
}
