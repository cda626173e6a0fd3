import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  armDeadline,
  DeadlineEntry,
  deadlineCounts,
  disarmDeadline,
  IDLE_LISTS_KEPT,
  resolutionOf,
} from '../src/exchange/deadline-sweep.js';

/** An entry that records its expiries and may act on other entries from inside one, as an exchange does. */
class Probe extends DeadlineEntry {
  armedAt = 0;
  timeoutMs = 0;
  armed = false;
  fired: { at: number; due: number; timeoutMs: number }[] = [];
  act: (() => void) | undefined;

  onDeadline(): void {
    expect(this.armed).toBe(true);
    this.armed = false;
    this.fired.push({ at: performance.now(), due: this.armedAt + this.timeoutMs, timeoutMs: this.timeoutMs });
    // Once: two entries re-arming each other from their expiries would never run out.
    const act = this.act;
    this.act = undefined;
    act?.();
  }
}

function arm(entry: Probe, timeoutMs: number): void {
  entry.armedAt = performance.now();
  entry.timeoutMs = timeoutMs;
  entry.armed = true;
  armDeadline(entry, timeoutMs);
}

function disarm(entry: Probe): void {
  entry.armed = false;
  disarmDeadline(entry);
}

type Step =
  | { kind: 'arm'; entry: number; timeout: number }
  | { kind: 'disarm'; entry: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'onExpiry'; entry: number; other: number; rearm: number | undefined };

const ENTRIES = 12;
// A few shared values (the response timeout) and many a hostile client might pick.
const timeout = fc.oneof(fc.constantFrom(1, 2, 50, 100, 1_000, 60_000), fc.integer({ min: 1, max: 20_000 }));
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('arm' as const), entry: fc.nat(ENTRIES - 1), timeout }),
  fc.record({ kind: fc.constant('disarm' as const), entry: fc.nat(ENTRIES - 1) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
  fc.record({
    kind: fc.constant('onExpiry' as const),
    entry: fc.nat(ENTRIES - 1),
    other: fc.nat(ENTRIES - 1),
    rearm: fc.option(timeout, { nil: undefined }),
  }),
);

describe('deadline sweep under any sequence of arms, disarms, re-arms and expiries that act', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.advanceTimersByTime(3_600_000);
    expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
    vi.useRealTimers();
  });

  it('fires each armed entry once, never early, at most a resolution late; a disarmed one never', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const probes = Array.from({ length: ENTRIES }, () => new Probe());
        for (const s of steps) {
          if (s.kind === 'arm') arm(probes[s.entry]!, s.timeout);
          else if (s.kind === 'disarm') disarm(probes[s.entry]!);
          else if (s.kind === 'advance') vi.advanceTimersByTime(s.ms);
          else {
            const other = probes[s.other]!;
            const rearm = s.rearm;
            probes[s.entry]!.act = () => {
              if (rearm === undefined) disarm(other);
              else arm(other, rearm);
            };
          }
          const armed = probes.filter((p) => p.armed);
          const counts = deadlineCounts();
          expect(counts.entries).toBe(armed.length);
          // A list per timeout in use, and at most IDLE_LISTS_KEPT emptied ones beside them.
          const inUse = new Set(armed.map((p) => p.timeoutMs)).size;
          expect(counts.lists).toBeGreaterThanOrEqual(inUse);
          expect(counts.lists - inUse).toBeLessThanOrEqual(IDLE_LISTS_KEPT);
        }
        // Everything still armed runs out.
        vi.advanceTimersByTime(25 * 60_000);
        for (const probe of probes) {
          expect(probe.armed).toBe(false);
          for (const { at, due, timeoutMs } of probe.fired) {
            expect(at).toBeGreaterThanOrEqual(due);
            expect(at).toBeLessThanOrEqual(due + resolutionOf(timeoutMs));
          }
        }
        // Emptied lists run out with their timers: nothing is left to keep anything alive.
        expect(deadlineCounts()).toEqual({ lists: 0, entries: 0 });
        expect(vi.getTimerCount()).toBe(0);
      }),
      { numRuns: 1000 },
    );
  });
});
