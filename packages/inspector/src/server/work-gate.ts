import { InspectorError, InspectorErrorCode } from '../errors.js';

/**
 * Expensive reads at once (HAR exports, body searches: each walks every stored body): the page needs one or
 * two; more would only share the agent's event loop and memory between callers nobody is waiting for.
 */
export const MAX_EXPENSIVE_READS = 2;

/**
 * A count of running expensive reads: `enter` gives a place (released once, by the function it returns) or
 * throws BUSY at once. Refused rather than queued: a queue would hold requests (and their sockets) for
 * callers that may be gone, and a caller can retry after Retry-After.
 */
export class WorkGate {
  readonly #max: number;
  #running = 0;

  constructor(max = MAX_EXPENSIVE_READS) {
    this.#max = max;
  }

  get running(): number {
    return this.#running;
  }

  enter(what: string): () => void {
    if (this.#running >= this.#max) {
      throw new InspectorError(
        InspectorErrorCode.BUSY,
        `${this.#max} HAR exports or body searches are running already: ${what} refused, retry shortly`,
      );
    }
    this.#running++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running--;
    };
  }
}
