import * as hdr from 'hdr-histogram-js';
import type { LatencyMs } from '../plan/report-schema.js';

/**
 * Records every response's latency twice: as measured, and corrected for coordinated omission.
 *
 * A connection that waits for a slow answer does not send the requests it was scheduled to send meanwhile,
 * so a stall hides the very requests that would have suffered from it. `recordValueWithExpectedInterval`
 * adds back, for a value V above the interval I, the values V - I, V - 2I, ... those unsent requests would
 * have seen. I is the time between two sends on one connection: connections / target rate.
 */
export interface LatencyRecorder {
  /** Records one response latency in ms. */
  record(latencyMs: number): void;
  /** Responses recorded. */
  readonly count: number;
  raw(): LatencyMs;
  corrected(): LatencyMs;
  /** Raw p99 so far (for progress lines). */
  p99(): number;
  destroy(): void;
}

// Latencies are kept in microseconds: ms resolution is too coarse for a loopback round trip of ~0.3 ms.
const US_PER_MS = 1000;
// Ten minutes: anything slower is a timeout long before (the generator's timeout is at most 10 minutes).
const HIGHEST_US = 600_000 * US_PER_MS;

function newHistogram(): hdr.Histogram {
  return hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 3,
    autoResize: false,
  });
}

function summarize(histogram: hdr.Histogram): LatencyMs {
  if (histogram.totalCount === 0) {
    return { min: 0, mean: 0, p50: 0, p75: 0, p90: 0, p95: 0, p99: 0, p999: 0, max: 0 };
  }
  // getValueAtPercentile answers the top of the value's bucket, which can lie a hair above the true max.
  const max = histogram.maxValue;
  const at = (percentile: number): number =>
    Math.min(max, histogram.getValueAtPercentile(percentile)) / US_PER_MS;
  return {
    min: histogram.minNonZeroValue / US_PER_MS,
    mean: histogram.mean / US_PER_MS,
    p50: at(50),
    p75: at(75),
    p90: at(90),
    p95: at(95),
    p99: at(99),
    p999: at(99.9),
    max: max / US_PER_MS,
  };
}

/**
 * @param expectedIntervalMs time between two scheduled sends on one connection; undefined for closed-loop
 * load, where there is no schedule to have fallen behind of (the corrected values then equal the raw ones).
 */
export function createLatencyRecorder(expectedIntervalMs: number | undefined): LatencyRecorder {
  const raw = newHistogram();
  const corrected = expectedIntervalMs === undefined ? undefined : newHistogram();
  const intervalUs =
    expectedIntervalMs === undefined ? 0 : Math.max(1, Math.round(expectedIntervalMs * US_PER_MS));
  return {
    record(latencyMs) {
      const us = Math.min(HIGHEST_US, Math.max(1, Math.round(latencyMs * US_PER_MS)));
      raw.recordValue(us);
      corrected?.recordValueWithExpectedInterval(us, intervalUs);
    },
    get count() {
      return raw.totalCount;
    },
    raw: () => summarize(raw),
    corrected: () => summarize(corrected ?? raw),
    p99: () => (raw.totalCount === 0 ? 0 : raw.getValueAtPercentile(99) / US_PER_MS),
    destroy() {
      raw.destroy();
      corrected?.destroy();
    },
  };
}
