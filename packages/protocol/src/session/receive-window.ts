import type { WindowBudget } from './window-budget.js';

/**
 * The least round trip a window is sized for. The measured one is the idle path's (0.1–0.3 ms on loopback),
 * but credit comes back only after the receiver's event loop has passed the bytes on and the sender's has
 * taken the WINDOW_UPDATE: under load, on cores shared with the client and the backend, that turnaround is
 * a millisecond or two whatever the path. Windows held at the initial 256 KiB on loopback capped 1 GiB
 * transfers at 460–590 MB/s with both processes partly idle; sized for 2 ms they carried 690–770 MB/s
 * (bench/README.md, "Receive windows on loopback"). A window grows only when consumed within two of these
 * (4 ms), so a steadily slow reader keeps the initial window.
 */
const TURNAROUND_FLOOR_MS = 2;
/**
 * On such a path (measured under the floor) a window grows to at most this: 4 MiB in two turnarounds is
 * 2 GB/s, more than a loopback transfer reaches here (windows settled at 1–4 MiB). A reader that was fast
 * and then stops reading holds its grown window until it reads again or the stream ends; this keeps that to
 * 4 MiB instead of `maxStreamWindow` (16 MiB), which only long paths need.
 */
const FAST_PATH_MAX_WINDOW = 4 * 1024 * 1024;
/** A window consumed in less than this many round trips limits its stream: it doubles. */
const GROW_BELOW_RTTS = 2;
/** A window that took more than this many round trips (a slow or idle consumer, a slow sender) halves. */
const SHRINK_ABOVE_RTTS = 8;

/** What a stream's receive window needs from its session to tune itself. */
export interface TuningHost {
  /** Shortest measured round trip in ms; 0 until measured. */
  readonly rttMs: number;
  /** Largest a stream's window may grow to. */
  readonly maxStreamWindow: number;
  /** The session's growth budget (itself drawing on a shared one, at the edge). */
  readonly windowBudget: WindowBudget;
}

/**
 * The size of one stream's receive window, following the bandwidth-delay product: growth above the initial
 * window is taken from the budget, a shrink withholds credit and gives the budget back as the peer's
 * outstanding credit comes back in. The invariant: what the peer may have in flight or we hold unconsumed
 * on this stream never exceeds `initial + held`, and `held` is budget this stream took.
 */
export class ReceiveWindow {
  readonly #initial: number;
  /** The window granted from now on: initial plus growth. */
  size: number;
  /** Budget held: growth, plus given-up growth whose credit the peer still holds (the withheld debt). */
  #held = 0;
  /** Added to (growth) or, negative, withheld from (a shrink's debt) the next credit returned. */
  #extra = 0;
  /** When the current window's worth of consumption began, and how much of it is done. */
  #epochStart = 0;
  #epochBytes = 0;

  constructor(initial: number) {
    this.#initial = initial;
    this.size = initial;
  }

  /**
   * Bytes were consumed. Measured over a whole window, so a consumer that drains in a burst after waiting
   * does not look fast: it took longer than two round trips for the window, which stays (or shrinks).
   * `at` is the time in ms (performance.now() when left out; tests pass their own clock).
   */
  consumed(bytes: number, host: TuningHost, at?: number): void {
    if (host.rttMs === 0 || host.maxStreamWindow <= this.#initial) return;
    const rtt = Math.max(host.rttMs, TURNAROUND_FLOOR_MS);
    // The clock is read only where an epoch starts or completes: consume() runs for every chunk read.
    if (this.#epochStart === 0) this.#epochStart = at ?? performance.now();
    this.#epochBytes += bytes;
    if (this.#epochBytes < this.size) return;
    const now = at ?? performance.now();
    const elapsed = now - this.#epochStart;
    this.#epochStart = now;
    this.#epochBytes = 0;
    if (elapsed < GROW_BELOW_RTTS * rtt) this.#grow(host);
    else if (elapsed > SHRINK_ABOVE_RTTS * rtt) this.#shrink(host.windowBudget);
  }

  /** The credit to return for `unacked` consumed bytes: more after growth, less (maybe 0) after a shrink. */
  credit(unacked: number, budget: WindowBudget): number {
    const increment = unacked + this.#extra;
    this.#extra = Math.min(0, increment);
    this.#settle(budget);
    return Math.max(0, increment);
  }

  /**
   * Grows the window by up to `bytes` at once, before any consumption was measured, within what the
   * budget has left and `host.maxStreamWindow`; returns the growth, which the caller grants the peer now
   * (it does not ride on a later credit). Later it shrinks like any grown window.
   */
  growNow(bytes: number, host: TuningHost): number {
    const want = Math.max(0, Math.min(bytes, host.maxStreamWindow - this.size));
    const taken = want > 0 ? host.windowBudget.take(want) : 0;
    this.#held += taken;
    this.size += taken;
    return taken;
  }

  /** The stream closed: nothing more can arrive on it, all its budget goes back. */
  release(budget: WindowBudget): void {
    budget.give(this.#held);
    this.#held = 0;
  }

  #grow(host: TuningHost): void {
    const max =
      host.rttMs < TURNAROUND_FLOOR_MS
        ? Math.min(host.maxStreamWindow, FAST_PATH_MAX_WINDOW)
        : host.maxStreamWindow;
    const want = Math.min(this.size * 2, max) - this.size;
    if (want <= 0) return;
    // Growth that cancels a pending shrink needs no new budget: that credit is still held.
    const debt = Math.max(0, -this.#extra);
    const taken = want > debt ? host.windowBudget.take(want - debt) : 0;
    const grow = Math.min(want, debt + taken);
    this.#held += taken;
    this.size += grow;
    this.#extra += grow;
  }

  #shrink(budget: WindowBudget): void {
    const next = Math.max(this.#initial, Math.floor(this.size / 2));
    this.#extra -= this.size - next;
    this.size = next;
    this.#settle(budget);
  }

  /** Gives back whatever budget is neither growth nor debt still out with the peer. */
  #settle(budget: WindowBudget): void {
    const owed = this.size - this.#initial + Math.max(0, -this.#extra);
    if (this.#held > owed) {
      budget.give(this.#held - owed);
      this.#held = owed;
    }
  }
}
