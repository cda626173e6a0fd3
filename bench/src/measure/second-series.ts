import * as hdr from 'hdr-histogram-js';
import type { SecondPoint } from '../plan/report-schema.js';
import { lowSamplePercentiles } from '../plan/sample-sufficiency.js';

/**
 * A stage's second-by-second record: how many requests finished in each second of the stage, how many of
 * them failed, and the p50 and p99 of the answers that completed in it. A stage's percentiles are taken
 * over all its requests, so a one-second stall in a 30-second stage moves its p99 a little and its p50 not
 * at all; here it is a second with a low rate and a high p99.
 *
 * Memory is bounded by the stage's length, not its request count: one histogram for the second in progress
 * (reset when the next second begins) and one small point per second behind it.
 */
export interface SecondSeriesRecorder {
  /** An answer (any status) that took `latencyMs`, completed at `atMs` (performance.now()). */
  response(latencyMs: number, ok: boolean, atMs: number): void;
  /** `count` requests that failed without an answer at `atMs`. */
  failed(count: number, atMs: number): void;
  /** Closes the last (partial) second at `atMs` and returns every second from the stage's start. */
  finish(atMs: number): SecondPoint[];
  /** Seconds closed so far (for tests: the recorder's memory is this many points and one histogram). */
  readonly closedSeconds: number;
}

const US_PER_MS = 1000;
const HIGHEST_US = 600_000 * US_PER_MS;
/** The last partial second is kept when it is at least this long; shorter, its rate would be noise. */
const MIN_PARTIAL_SEC = 0.1;

const round = (n: number, digits: number): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** @param startAt performance.now() at the stage's first scheduled send: second 0 starts there. */
export function createSecondSeries(startAt: number): SecondSeriesRecorder {
  // Two significant digits (1 %) is plenty for a per-second figure, and keeps the reset per second cheap.
  const histogram = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 2,
    autoResize: false,
  });
  const points: SecondPoint[] = [];
  let current = 0;
  let requests = 0;
  let errors = 0;

  const close = (durationSec: number): void => {
    const answered = histogram.totalCount;
    const at = (p: number): number | null =>
      answered === 0
        ? null
        : round(Math.min(histogram.maxValue, histogram.getValueAtPercentile(p)) / US_PER_MS, 3);
    points.push({
      second: current,
      durationSec: round(durationSec, 3),
      requests,
      errors,
      achievedRps: round(requests / durationSec, 2),
      p50Ms: at(50),
      p99Ms: at(99),
      lowSamplePercentiles: answered === 0 ? [] : lowSamplePercentiles(answered, ['p50', 'p99']),
    });
    histogram.reset();
    requests = 0;
    errors = 0;
    current += 1;
  };

  /** Closes every second before the one `atMs` falls in; seconds with nothing in them are points too. */
  const advance = (atMs: number): void => {
    const second = Math.max(0, Math.floor((atMs - startAt) / 1000));
    while (current < second) close(1);
  };

  return {
    response(latencyMs, ok, atMs) {
      advance(atMs);
      requests += 1;
      if (!ok) errors += 1;
      histogram.recordValue(Math.min(HIGHEST_US, Math.max(1, Math.round(latencyMs * US_PER_MS))));
    },
    failed(count, atMs) {
      advance(atMs);
      requests += count;
      errors += count;
    },
    finish(atMs) {
      advance(atMs);
      const partial = (atMs - startAt) / 1000 - current;
      if (partial >= MIN_PARTIAL_SEC || requests > 0) close(Math.max(partial, MIN_PARTIAL_SEC));
      histogram.destroy();
      return points;
    },
    get closedSeconds() {
      return points.length;
    },
  };
}
