/** Work on the event loop is cut into slices of about this long: the agent's tunnel runs on the same loop. */
export const SLICE_MS = 4;

/**
 * Long work (a HAR export, a body search) calls `yield()` between small steps: once a slice's time is spent
 * it waits for the loop's next turn (setImmediate), so I/O callbacks (the tunnel's frames) run in between.
 * No step is split: a step must itself be short (a body is read per slice of at most 64 KiB).
 */
export class TimeSlicer {
  readonly #sliceMs: number;
  #started = performance.now();

  constructor(sliceMs = SLICE_MS) {
    this.#sliceMs = sliceMs;
  }

  /** Resolves at once while the slice lasts, else on the loop's next turn (then a new slice starts). */
  async yield(): Promise<void> {
    if (performance.now() - this.#started < this.#sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.#started = performance.now();
  }
}
