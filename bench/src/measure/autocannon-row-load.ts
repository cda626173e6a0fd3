import { type LoadSpec, runLoad } from './load-runner.js';
import type { RowLoad } from './side-by-side-rows.js';

/**
 * The kit's autocannon run (paced or closed loop) as a row of `h2`, `grpc` and `tls`: a fixed-rate row's
 * p99 is the one corrected for coordinated omission, as the staged scenarios' headline.
 */
export async function autocannonRowLoad(spec: LoadSpec): Promise<RowLoad> {
  const load = await runLoad(spec);
  const errors: Record<string, number> = {};
  for (const [kind, n] of Object.entries(load.outcomes.errors))
    if (n !== undefined && n > 0) errors[kind] = n;
  return {
    durationSec: load.durationSec,
    requests: load.outcomes.finished,
    ok: load.outcomes.ok,
    errors,
    latencyMs: {
      p50: load.latency.p50,
      p99: spec.ratePerSec === undefined ? load.latency.p99 : load.correctedLatency.p99,
      mean: load.latency.mean,
      max: load.latency.max,
    },
    bytes: load.outcomes.bytes,
    missedSlots: spec.ratePerSec === undefined ? null : load.missedSlots,
  };
}
