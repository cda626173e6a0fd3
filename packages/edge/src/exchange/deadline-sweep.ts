/**
 * Coarse deadlines for exchanges: one timer per distinct timeout (all requests share the response timeout,
 * a gRPC call brings its own) instead of a Node `Timeout` per request. Issue #34's profile of the edge in a
 * closed loop read 1.5–2 µs of timer code per request (`setTimeout`, `insert`, `unenroll`), against the
 * HTTP floor's 0.2, and a Timeout object per request for the collector.
 *
 * Entries of one timeout are armed in time order, so their deadlines are too: each timeout's entries form
 * a FIFO list (linked through the entries themselves: nothing is allocated per request), and its timer
 * only ever waits for the list's head. An entry expires at its deadline or up to `resolutionOf(timeout)`
 * later (a tenth of the timeout, at most one second), never earlier: a sweep that wakes takes every
 * entry whose deadline has passed, then sleeps until the new head's deadline, at least one resolution.
 */

/** Something with a deadline. Its link fields belong to the sweep. */
export abstract class DeadlineEntry {
  /** `performance.now()` at which the entry expires; meaningful while linked. */
  deadlineAt = 0;
  deadlinePrev: DeadlineEntry | undefined = undefined;
  deadlineNext: DeadlineEntry | undefined = undefined;
  /** The list the entry is linked into: undefined when it is not armed. */
  deadlineList: DeadlineList | undefined = undefined;

  /** The deadline passed (the entry is no longer armed). */
  abstract onDeadline(): void;
}

/** How many lists may stay in the table while empty (see `lists`). */
export const IDLE_LISTS_KEPT = 8;

/** How late past its deadline an entry of `timeoutMs` may expire: a tenth of it, at most a second. */
export function resolutionOf(timeoutMs: number): number {
  return Math.min(1000, Math.max(1, Math.ceil(timeoutMs / 10)));
}

/** The entries armed with one timeout, oldest first, and the timer waiting for the oldest. */
class DeadlineList {
  head: DeadlineEntry | undefined = undefined;
  tail: DeadlineEntry | undefined = undefined;
  timer: NodeJS.Timeout | undefined = undefined;
  readonly timeoutMs: number;
  readonly resolutionMs: number;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
    this.resolutionMs = resolutionOf(timeoutMs);
  }

  readonly sweep = (): void => {
    this.timer = undefined;
    const now = performance.now();
    for (let entry = this.head; entry !== undefined && entry.deadlineAt <= now; entry = this.head) {
      unlink(entry);
      // It may arm or disarm others (its finish does): the loop reads the head again each time.
      entry.onDeadline();
    }
    if (this.head === undefined) {
      // Empty, unless an expiry armed an entry here and left (its timer then runs, and drops the list).
      if (this.timer === undefined) this.drop();
      return;
    }
    // An expiry that armed an entry here started a wait for a full timeout: the head may be due sooner.
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.#wait(this.head.deadlineAt - performance.now());
  };

  append(entry: DeadlineEntry): void {
    entry.deadlineList = this;
    entry.deadlinePrev = this.tail;
    entry.deadlineNext = undefined;
    if (this.tail === undefined) this.head = entry;
    else this.tail.deadlineNext = entry;
    this.tail = entry;
    if (this.timer === undefined) this.#wait(this.timeoutMs);
  }

  /** Leaves the table (a later entry of this timeout starts a new list), its timer stopped. */
  drop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (lists.get(this.timeoutMs) === this) lists.delete(this.timeoutMs);
  }

  #wait(ms: number): void {
    // Unref'd: a pending exchange keeps the process alive through its sockets, not through this timer.
    this.timer = setTimeout(this.sweep, Math.max(this.resolutionMs, Math.ceil(ms))).unref();
  }
}

/**
 * One list per timeout in use. An emptied list is kept (its timer left to run out, then it is dropped)
 * only while there are at most IDLE_LISTS_KEPT lists: at a low rate the response timeout's list empties
 * after nearly every request, and dropping it each time would cost a timer per request again; but a
 * client choosing many distinct gRPC deadlines must not leave a list and a timer behind for each.
 */
const lists = new Map<number, DeadlineList>();

/** Arms `entry` to expire `timeoutMs` from now (re-arming it if it was armed). */
export function armDeadline(entry: DeadlineEntry, timeoutMs: number): void {
  if (entry.deadlineList !== undefined) unlink(entry);
  let list = lists.get(timeoutMs);
  if (list === undefined) {
    list = new DeadlineList(timeoutMs);
    lists.set(timeoutMs, list);
  }
  entry.deadlineAt = performance.now() + timeoutMs;
  list.append(entry);
}

/** Disarms `entry`: its deadline will not fire. Nothing happens if it is not armed. */
export function disarmDeadline(entry: DeadlineEntry): void {
  const list = entry.deadlineList;
  if (list === undefined) return;
  unlink(entry);
  if (list.head === undefined && lists.size > IDLE_LISTS_KEPT) list.drop();
}

/** Timeouts with a list, armed entries in all of them: for tests (a finished entry must not stay linked). */
export function deadlineCounts(): { lists: number; entries: number } {
  let entries = 0;
  for (const list of lists.values()) for (let e = list.head; e !== undefined; e = e.deadlineNext) entries++;
  return { lists: lists.size, entries };
}

function unlink(entry: DeadlineEntry): void {
  const list = entry.deadlineList!;
  const { deadlinePrev: prev, deadlineNext: next } = entry;
  if (prev === undefined) list.head = next;
  else prev.deadlineNext = next;
  if (next === undefined) list.tail = prev;
  else next.deadlinePrev = prev;
  entry.deadlinePrev = undefined;
  entry.deadlineNext = undefined;
  entry.deadlineList = undefined;
}
