import type { SecondPoint } from '../plan/report-schema.js';
import { lowSamplePercentiles, type PercentileKey } from '../plan/sample-sufficiency.js';
import type { LoadResult } from './load-runner.js';

/**
 * What a stage of the standalone scenarios (floor, cluster, tcp) carries besides its figures, as the staged
 * scenarios' side reports do: how many answers its percentiles come from, which of them are too few to be
 * read as percentiles, and the stage second by second.
 */
export interface SecondsRecord {
  /** Answers timed: the samples p50Ms / p99Ms were computed from. */
  latencySamples: number;
  /** The percentiles those samples are too few for (n · (1 − p) < 10): p99 needs 1,000. */
  lowSamplePercentiles: PercentileKey[];
  perSecond: SecondPoint[];
}

export function secondsRecord(load: LoadResult): SecondsRecord {
  return {
    latencySamples: load.latencySamples,
    lowSamplePercentiles: lowSamplePercentiles(load.latencySamples, ['p50', 'p99']),
    perSecond: load.perSecond,
  };
}
