import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  armDeadline,
  DeadlineEntry,
  deadlineCounts,
  disarmDeadline,
  IDLE_LISTS_KEPT,
  resolutionOf,
} from '../src/exchange/deadline-sweep.js';

/** An entry that notes when its deadline fired (fake time), and may act on others as it does. */
class Probe extends DeadlineEntry {
  firedAt: number | undefined;
  alsoDo?: () => void;

  onDeadline(): void {
    this.firedAt = performance.now();
    this.alsoDo?.();
  }
}

describe('deadline sweep', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    // The lists are the module's: every one must run out under the fake clock that armed its timer.
    vi.advanceTimersByTime(3_600_000);
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
    vi.useRealTimers();
  });

  it('resolution: a tenth of the timeout, at least 1 ms and at most a second', () => {
    expect(resolutionOf(1)).toBe(1);
    expect(resolutionOf(200)).toBe(20);
    expect(resolutionOf(5_000)).toBe(500);
    expect(resolutionOf(60_000)).toBe(1_000);
  });

  it('fires every entry at its deadline or within one resolution after it, never before', () => {
    const start = performance.now();
    const entries: Probe[] = [];
    // Armed over 1.5 s, one every 7 ms: one list, its timer waking for the head only.
    for (let i = 0; i < 200; i++) {
      const entry = new Probe();
      armDeadline(entry, 1_000);
      entries.push(entry);
      vi.advanceTimersByTime(7);
    }
    vi.advanceTimersByTime(2_000);
    for (const [i, entry] of entries.entries()) {
      const deadline = start + i * 7 + 1_000;
      expect(entry.firedAt).toBeGreaterThanOrEqual(deadline);
      expect(entry.firedAt).toBeLessThanOrEqual(deadline + resolutionOf(1_000));
    }
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
  });

  it('keeps one list per timeout, and a short one is not held behind a long one', () => {
    const long = new Probe();
    const short = new Probe();
    armDeadline(long, 60_000);
    armDeadline(short, 200);
    expect(deadlineCounts()).toEqual({ lists: 2, entries: 2 });
    vi.advanceTimersByTime(220);
    expect(short.firedAt).toBeDefined();
    expect(long.firedAt).toBeUndefined();
    vi.advanceTimersByTime(61_000);
    expect(long.firedAt).toBeDefined();
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
  });

  it('a disarmed entry never fires, wherever it was in its list, and is unlinked at once', () => {
    const entries = [new Probe(), new Probe(), new Probe(), new Probe()];
    for (const entry of entries) armDeadline(entry, 100);
    disarmDeadline(entries[0]!);
    disarmDeadline(entries[2]!);
    disarmDeadline(entries[3]!);
    disarmDeadline(entries[3]!);
    expect(deadlineCounts()).toEqual({ lists: 1, entries: 1 });
    vi.advanceTimersByTime(200);
    expect(entries.map((e) => e.firedAt !== undefined)).toEqual([false, true, false, false]);
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
  });

  it('keeps a bounded number of emptied lists: many distinct deadlines leave at most a few timers', () => {
    for (let timeout = 1_000; timeout < 1_100; timeout++) {
      const entry = new Probe();
      armDeadline(entry, timeout);
      disarmDeadline(entry);
    }
    expect(deadlineCounts().entries).toBe(0);
    expect(deadlineCounts().lists).toBeLessThanOrEqual(IDLE_LISTS_KEPT + 1);
    expect(vi.getTimerCount()).toBeLessThanOrEqual(IDLE_LISTS_KEPT + 1);
    // Those left run out at their timeout and go.
    vi.advanceTimersByTime(1_100);
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps the one list of a low rate between its requests: no timer per request', () => {
    for (let i = 0; i < 50; i++) {
      const entry = new Probe();
      armDeadline(entry, 60_000);
      disarmDeadline(entry);
      vi.advanceTimersByTime(10);
    }
    expect(deadlineCounts()).toEqual({ lists: 1, entries: 0 });
    expect(vi.getTimerCount()).toBe(1);
  });

  it('an expiry may disarm the next entry or arm a new one in the same list', () => {
    const first = new Probe();
    const second = new Probe();
    const later = new Probe();
    armDeadline(first, 100);
    armDeadline(second, 100);
    first.alsoDo = () => {
      disarmDeadline(second);
      armDeadline(later, 100);
    };
    vi.advanceTimersByTime(110);
    expect(first.firedAt).toBeDefined();
    expect(deadlineCounts()).toEqual({ lists: 1, entries: 1 });
    vi.advanceTimersByTime(120);
    expect(second.firedAt).toBeUndefined();
    expect(later.firedAt).toBeDefined();
    expect(later.firedAt! - first.firedAt!).toBeGreaterThanOrEqual(100);
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
  });

  it('re-arming moves an entry to its new deadline', () => {
    const entry = new Probe();
    armDeadline(entry, 100);
    vi.advanceTimersByTime(50);
    armDeadline(entry, 100);
    vi.advanceTimersByTime(60);
    expect(entry.firedAt).toBeUndefined();
    vi.advanceTimersByTime(60);
    expect(entry.firedAt).toBeDefined();
  });
});
