import type { Logger } from 'pino';

/** Past the first warning, at most one per this period, with the count since the last. */
export const WARNING_PERIOD_MS = 10_000;

/**
 * A warning for something that can happen thousands of times a second (a flood of connections): the first
 * occurrence is logged at once, later ones are counted and logged together at most once per period, so the
 * log says how many without growing with the flood.
 */
export class RateLimitedWarning {
  readonly #logger: Logger;
  readonly #message: string;
  readonly #fields: Readonly<Record<string, unknown>>;
  #unlogged = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(logger: Logger, message: string, fields: Readonly<Record<string, unknown>> = {}) {
    this.#logger = logger;
    this.#message = message;
    this.#fields = fields;
  }

  note(): void {
    if (this.#timer !== undefined) {
      this.#unlogged++;
      return;
    }
    this.#logger.warn({ ...this.#fields, count: 1 }, this.#message);
    this.#arm();
  }

  /** Logs what is still counted and stops the period's timer. */
  close(): void {
    this.#flush();
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#flush()) this.#arm();
    }, WARNING_PERIOD_MS);
    this.#timer.unref();
  }

  /** True when something was logged. */
  #flush(): boolean {
    if (this.#unlogged === 0) return false;
    this.#logger.warn({ ...this.#fields, count: this.#unlogged, periodMs: WARNING_PERIOD_MS }, this.#message);
    this.#unlogged = 0;
    return true;
  }
}
