/**
 * Whether a percentile can be read from the samples it was computed from.
 *
 * Above percentile p of n samples lie n·(1 − p) of them. With fewer than ten there, the percentile is set by
 * a handful of requests: the p99 of a 61-request stage is its slowest request (the max), and one slow
 * answer more or less moves it by any amount. So a percentile with n·(1 − p) < 10 is flagged: p50 needs 20
 * samples, p90 100, p99 1,000, p99.9 10,000. The rule is the usual one for tail estimates (HdrHistogram's
 * and wrk2's authors say the same in other words: a percentile is only as good as the samples beyond it).
 */

export type PercentileKey = 'p50' | 'p75' | 'p90' | 'p95' | 'p99' | 'p999';

/** Samples that must lie beyond a percentile for it to be read as one. */
export const MIN_SAMPLES_BEYOND = 10;

/** Each percentile in per mille, so the rule is integer arithmetic (100 · (1 − 0.9) is 9.999… in floats). */
const PER_MILLE: Record<PercentileKey, number> = {
  p50: 500,
  p75: 750,
  p90: 900,
  p95: 950,
  p99: 990,
  p999: 999,
};

export const PERCENTILE_KEYS = Object.keys(PER_MILLE) as PercentileKey[];

/** True when fewer than MIN_SAMPLES_BEYOND of `samples` lie beyond `percentile`. */
export function tooFewSamples(percentile: PercentileKey, samples: number): boolean {
  return samples * (1000 - PER_MILLE[percentile]) < MIN_SAMPLES_BEYOND * 1000;
}

/** The least sample count at which `percentile` is not flagged (p99: 1,000). */
export function samplesNeeded(percentile: PercentileKey): number {
  return Math.ceil((MIN_SAMPLES_BEYOND * 1000) / (1000 - PER_MILLE[percentile]));
}

/** The percentiles that `samples` are too few for, in ascending order. */
export function lowSamplePercentiles(
  samples: number,
  keys: readonly PercentileKey[] = PERCENTILE_KEYS,
): PercentileKey[] {
  return keys.filter((key) => tooFewSamples(key, samples));
}

/** The mark beside a flagged percentile in report.md and report.html. */
export const LOW_SAMPLE_MARK = '~';

/** The footnote that explains the mark, wherever it appears. */
export const LOW_SAMPLE_NOTE =
  `${LOW_SAMPLE_MARK} = too few samples for this percentile: fewer than ${MIN_SAMPLES_BEYOND} lie beyond it ` +
  `(n · (1 − p) < ${MIN_SAMPLES_BEYOND}; p50 needs ${samplesNeeded('p50')} answers, p99 ` +
  `${samplesNeeded('p99').toLocaleString('en-US')}, p99.9 ${samplesNeeded('p999').toLocaleString('en-US')}), ` +
  'so a few requests set it and it may equal the max: read it as a rough bound, not a percentile.';
