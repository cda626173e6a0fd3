/**
 * Long work on the event loop (HAR exports, body searches) runs in slices of about this long, and all of it
 * together gets one slice per turn of the loop: the agent's tunnel shares the loop, and each of its
 * requests needs a few turns, so this is about what the inspector adds to each of them however many
 * exports and searches run.
 */
export const SLICE_MS = 2;
/**
 * And a rest of this long after each slice before the next one: the inspector's long work takes at most an
 * eighth of the agent's CPU (a HAR of a full 64 MiB store still streams in about 3 s, a search of it in
 * under two), leaving the rest to the tunnel and, on a small machine, to the backend beside it. Measured
 * with `bench/scripts/inspect-abuse.ts 3 200 10 har` on a quiet 2-core machine: with a rest three slices
 * long the tunnel's p99 under HAR abuse was 2.3-3.3x its baseline, with seven 1.8-2.0x.
 */
export const REST_MS = 7 * SLICE_MS;

/**
 * One slice per turn of the loop, handed round-robin to the work waiting for one, and a rest after each
 * (REST_MS): all of it together takes at most an eighth of the agent's CPU, so the tunnel's requests find the
 * CPU and the loop free most of the time. A turn is a setImmediate (one queued from a check phase runs after
 * the next poll, so the tunnel's I/O callbacks run between slices), or a timer while the rest lasts.
 */
class SliceScheduler {
  #owner: TimeSlicer | undefined;
  #started = 0;
  #ended = Number.NEGATIVE_INFINITY;
  readonly #waiting: { slicer: TimeSlicer; resume: () => void }[] = [];
  #turnPlanned = false;

  ownsSlice(slicer: TimeSlicer): boolean {
    return this.#owner === slicer && performance.now() - this.#started < SLICE_MS;
  }

  wait(slicer: TimeSlicer): Promise<void> {
    if (this.#owner === slicer) {
      this.#owner = undefined;
      this.#ended = performance.now();
    }
    return new Promise((resume) => {
      this.#waiting.push({ slicer, resume });
      this.#planTurn();
    });
  }

  #planTurn(): void {
    if (this.#turnPlanned || this.#waiting.length === 0) return;
    this.#turnPlanned = true;
    setImmediate(this.#turn);
  }

  readonly #turn = (): void => {
    // Planned while the last slice ran: its rest is known only now.
    const rest = this.#ended + REST_MS - performance.now();
    if (rest > 0) {
      setTimeout(this.#turn, rest);
      return;
    }
    this.#turnPlanned = false;
    const next = this.#waiting.shift();
    if (next === undefined) return;
    this.#owner = next.slicer;
    this.#started = performance.now();
    next.resume();
    this.#planTurn();
  };
}

const scheduler = new SliceScheduler();

/**
 * One piece of long work's share of the loop: it calls `yield()` between small steps (a body is read per
 * window of at most 64 KiB), which returns at once while its slice lasts, else waits for its next slice.
 */
export class TimeSlicer {
  yield(): Promise<void> | undefined {
    return scheduler.ownsSlice(this) ? undefined : scheduler.wait(this);
  }
}
