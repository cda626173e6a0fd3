import type { StageReport } from '../plan/report-schema.js';

const ms = (n: number): string => {
  const abs = Math.abs(n);
  const text = abs < 10 ? abs.toFixed(2) : abs.toFixed(0);
  return `${n < 0 ? '−' : '+'}${text} ms`;
};

/** "At 200 RPS (stage 2)" or "With 50 connections (stage 2)". */
export function stageName(stage: StageReport): string {
  return stage.targetRps === null
    ? `With ${stage.connections} connections (stage ${stage.index})`
    : `At ${stage.targetRps} RPS (stage ${stage.index})`;
}

/**
 * What the tunnel cost at a stage, as one sentence to paste: latency added at p50 and p99 (as measured,
 * and p99 corrected), its CPU per request, and the throughput it kept. Null unless both sides ran.
 */
export function costSentence(stage: StageReport): string | null {
  const { direct, tunnel, comparison } = stage;
  if (direct === null || tunnel === null || comparison === null) return null;
  const rough = tunnel.lowSamplePercentiles?.includes('p99') || direct.lowSamplePercentiles?.includes('p99');
  const latency =
    `the tunnel added ${ms(comparison.addedP50Ms)} at p50 and ${ms(comparison.addedP99Ms)} at p99` +
    `${rough ? ' (p99 from too few answers)' : ''}`;
  const edge = tunnel.edge?.cpuPerRequestUs;
  const agent = tunnel.agent?.cpuPerRequestUs;
  const cpu =
    tunnel.tunnelCpuPerRequestUs === null || tunnel.tunnelCpuPerRequestUs === undefined
      ? 'its CPU per request is not known (the edge and agent are not metered here)'
      : `cost ${tunnel.tunnelCpuPerRequestUs.toFixed(0)} µs of CPU per request ` +
        `(edge ${edge?.toFixed(0) ?? '?'}, agent ${agent?.toFixed(0) ?? '?'})`;
  const kept = `kept ${(100 * comparison.throughputRatio).toFixed(1)} % of the direct side's throughput`;
  return `${stageName(stage)} ${latency}, ${cpu}, and ${kept}.`;
}
