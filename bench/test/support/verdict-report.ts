import type {
  BenchReport,
  LatencyMs,
  ProcessUsageReport,
  SideReport,
  StageReport,
} from '../../src/plan/report-schema.js';
import { lowSamplePercentiles } from '../../src/plan/sample-sufficiency.js';
import type { VerdictInput } from '../../src/verdict/build-verdict.js';

// Reports built for the verdict's table cases: every figure the rules read is set by the case, the rest is
// a healthy default.

const latency = (p50: number, p99: number): LatencyMs => ({
  min: p50 / 2,
  mean: p50,
  p50,
  p75: p50,
  p90: p99,
  p95: p99,
  p99,
  p999: p99,
  max: p99,
});

export const usage = (
  cpuPct: number,
  wait = 0,
  cpuPerRequestUs: number | null = 100,
): ProcessUsageReport => ({
  cpuMs: cpuPct * 50,
  cpuPct,
  peakRssMb: 50,
  cpuPerRequestUs,
  runQueueWaitPct: wait,
});

export interface SideCase {
  rps?: number;
  successPct?: number;
  p50?: number;
  p99?: number;
  sent?: number;
  samples?: number;
  generator?: ProcessUsageReport;
  backend?: ProcessUsageReport | null;
  edge?: ProcessUsageReport | null;
  agent?: ProcessUsageReport | null;
  tunnelUs?: number | null;
  busy?: number | null;
  /** Measured seconds of the side (5 planned). */
  seconds?: number;
}

/** A side of a 5 s stage. */
function side(c: SideCase, tunnel: boolean): SideReport {
  const rps = c.rps ?? 100;
  const requests = Math.round(rps * 5);
  const samples = c.samples ?? 10_000;
  const report: SideReport = {
    requests,
    ok: Math.round((requests * (c.successPct ?? 100)) / 100),
    errors: {},
    successPct: c.successPct ?? 100,
    sent: c.sent ?? requests,
    missedSlots: 0,
    offeredRps: rps,
    achievedRps: requests / (c.seconds ?? 5),
    durationSec: c.seconds ?? 5,
    bytes: 0,
    latencyMs: latency(c.p50 ?? 1, c.p99 ?? 3),
    correctedLatencyMs: latency(c.p50 ?? 1, c.p99 ?? 3),
    correctedP99Ms: c.p99 ?? 3,
    latencySamples: samples,
    lowSamplePercentiles: lowSamplePercentiles(samples),
    keptUp: true,
    shortfall: null,
    backend: c.backend === undefined ? usage(10) : c.backend,
    generator: { ...(c.generator ?? usage(10)), eventLoopDelayP99Ms: 2 },
    machine: {
      loadAverageBefore: 0.5,
      loadAverageAfter: 0.6,
      busyCpuPct: c.busy === undefined ? null : c.busy,
    },
  };
  if (tunnel) {
    report.edge = c.edge === undefined ? usage(20) : c.edge;
    report.agent = c.agent === undefined ? usage(20) : c.agent;
    report.tunnelCpuPerRequestUs = c.tunnelUs === undefined ? 200 : c.tunnelUs;
  }
  return report;
}

export function stage(
  index: number,
  targetRps: number | null,
  direct: SideCase | null,
  tunnel: SideCase | null,
): StageReport {
  const d = direct === null ? null : side(direct, false);
  const t = tunnel === null ? null : side(tunnel, true);
  return {
    index,
    mode: targetRps === null ? 'closed' : 'rate',
    targetRps,
    connections: 10,
    durationSec: 5,
    direct: d,
    tunnel: t,
    comparison:
      d === null || t === null
        ? null
        : {
            throughputRatio: t.achievedRps / d.achievedRps,
            addedP50Ms: t.latencyMs.p50 - d.latencyMs.p50,
            addedP99Ms: t.latencyMs.p99 - d.latencyMs.p99,
            addedCorrectedP99Ms: t.correctedP99Ms - d.correctedP99Ms,
            p50Ratio: t.latencyMs.p50 / d.latencyMs.p50,
            p99Ratio: t.latencyMs.p99 / d.latencyMs.p99,
          },
  };
}

export function input(stages: StageReport[], extra: Partial<BenchReport['settings']> = {}): VerdictInput {
  const sides = (['direct', 'tunnel'] as const).filter((s) => stages.some((st) => st[s] !== null));
  return {
    stages,
    aborted: null,
    settings: {
      path: '/',
      warmupSec: 0,
      timeoutSec: 10,
      sides: [...sides],
      backendUrl: 'http://127.0.0.1:1/',
      tunnelUrl: null,
      inspect: 'off',
      targetUrl: null,
      ...extra,
    },
  };
}
