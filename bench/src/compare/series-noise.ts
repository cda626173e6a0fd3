/**
 * How steady a stage was second by second, read from its `perSecond` series (report.schema.json's
 * secondPoint). The rate and the p50: the interquartile range of the seconds' values over their median
 * (0.04: the middle half of the seconds lie within 4 % of the typical second). The p99: how many times the
 * best second's p99 the worst second's is, less one (latency spreads by factors, not by milliseconds): one
 * stalled second (a busy machine, a GC) sets a stage's p99, and the next run's stall lands elsewhere or
 * nowhere, so a p99 is only as steady as its seconds are alike. Partial seconds (the stage's last) are left
 * out; fewer than four full seconds, or a median (a best p99) of 0, tell nothing (null).
 *
 * That band is right for the stage's p99 but too wide to gate on (±600 % to ±3,500 % on real runs): a
 * regression would show only if every second moved. So the seconds' p99s also give a figure of their own,
 * `typicalSecondP99`: their median, with their interquartile range over it as its noise. A stall moves
 * one second's p99 and not the median of ten; a change that slows every request moves it, as k6's
 * per-run p99 threshold would see.
 */
export interface SeriesNoise {
  rate: number | null;
  p50: number | null;
  p99: number | null;
  typicalSecondP99: { value: number; noise: number } | null;
}

const MIN_SECONDS = 4;

export function seriesNoise(points: readonly unknown[]): SeriesNoise {
  const full = points.filter(
    (p): p is Record<string, unknown> =>
      typeof p === 'object' && p !== null && (p as { durationSec?: unknown }).durationSec === 1,
  );
  const pick = (field: string): number[] =>
    full.map((p) => p[field]).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return {
    rate: spread(pick('achievedRps')),
    p50: spread(pick('p50Ms')),
    p99: worstOverBest(pick('p99Ms')),
    typicalSecondP99: medianWithSpread(pick('p99Ms')),
  };
}

export function worstOverBest(values: readonly number[]): number | null {
  if (values.length < MIN_SECONDS) return null;
  const best = Math.min(...values);
  return best <= 0 ? null : Math.max(...values) / best - 1;
}

function quantile(sorted: readonly number[], q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const a = sorted[lo] ?? 0;
  const b = sorted[Math.min(lo + 1, sorted.length - 1)] ?? a;
  return a + (b - a) * (pos - lo);
}

export function spread(values: readonly number[]): number | null {
  if (values.length < MIN_SECONDS) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = quantile(sorted, 0.5);
  return mid === 0 ? null : (quantile(sorted, 0.75) - quantile(sorted, 0.25)) / Math.abs(mid);
}

/** The median of the values with their interquartile range over it; null as `spread`. */
export function medianWithSpread(values: readonly number[]): { value: number; noise: number } | null {
  const noise = spread(values);
  if (noise === null) return null;
  return {
    value: quantile(
      [...values].sort((a, b) => a - b),
      0.5,
    ),
    noise,
  };
}
