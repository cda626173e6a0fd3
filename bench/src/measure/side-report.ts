import type {
  Comparison,
  InspectorCost,
  MachineLoad,
  ProcessUsageReport,
  SideName,
  SideReport,
  SideTotals,
  StageReport,
} from '../plan/report-schema.js';
import { lowSamplePercentiles } from '../plan/sample-sufficiency.js';
import type { StagePlan } from '../plan/scenarios.js';
import type { LoadResult } from './load-runner.js';
import type { ProcessUsage } from './process-stats.js';

/** A fixed-rate stage that completes less than this share of its target did not really run at its rate. */
export const KEEP_UP_RATIO = 0.95;
/** Beyond this event-loop delay (or CPU share) the load generator, not the stack, sets the pace. */
const GENERATOR_LOOP_DELAY_LIMIT_MS = 50;
const GENERATOR_CPU_LIMIT_PCT = 90;

export interface SideUsage {
  backend: ProcessUsage | null;
  edge: ProcessUsage | null;
  agent: ProcessUsage | null;
  /** With the machine around it when meterSelf() measured it. */
  generator: ProcessUsage & { machine?: MachineLoad };
}

const round = (n: number, digits = 3): number => {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
};

function roundLatency<T extends object>(latency: T): T {
  return Object.fromEntries(Object.entries(latency).map(([k, v]) => [k, round(v as number)])) as T;
}

/** µs of CPU per finished request; null when nothing finished or the CPU time is unknown. */
export function perRequestUs(cpuMs: number | undefined, requests: number): number | null {
  return cpuMs === undefined || requests === 0 ? null : round((cpuMs * 1000) / requests, 1);
}

function usageReport(usage: ProcessUsage | null, requests: number): ProcessUsageReport | null {
  return usage === null
    ? null
    : {
        cpuMs: round(usage.cpuMs, 0),
        cpuPct: round(usage.cpuPct, 1),
        peakRssMb: round(usage.peakRssMb, 1),
        cpuPerRequestUs: perRequestUs(usage.cpuMs, requests),
        runQueueWaitPct: usage.runQueueWaitPct === null ? null : round(usage.runQueueWaitPct, 1),
        busiestThreadPct: usage.busiestThreadPct === null ? null : round(usage.busiestThreadPct, 1),
      };
}

/** Why a fixed-rate stage fell short of its target, from what was measured alongside. */
function shortfallReason(
  stage: StagePlan,
  side: SideName,
  result: LoadResult,
  generator: ProcessUsage,
  achieved: number,
): string {
  const target = stage.targetRps ?? 0;
  const head = `achieved ${achieved.toFixed(1)} of ${target} RPS`;
  if (
    result.generatorLoopDelayP99Ms > GENERATOR_LOOP_DELAY_LIMIT_MS ||
    generator.cpuPct > GENERATOR_CPU_LIMIT_PCT
  ) {
    return (
      `${head}: the load generator could not keep up (event-loop delay p99 ${result.generatorLoopDelayP99Ms.toFixed(1)} ms, ` +
      `CPU ${generator.cpuPct.toFixed(0)} % of a core), so these numbers measure it, not the ${side} side`
    );
  }
  if (result.missedSlots > 0) {
    const intervalMs = (1000 * stage.connections) / target;
    return (
      `${head}: answers took longer than connections/rate (${intervalMs.toFixed(0)} ms), so ${result.missedSlots} ` +
      `scheduled sends were skipped: the ${side} side could not serve this rate with ${stage.connections} connections ` +
      '(the corrected percentiles count the skipped sends)'
    );
  }
  const unanswered = result.outcomes.sent - result.outcomes.finished;
  if (unanswered > 0) return `${head}: ${unanswered} requests were still unanswered when the stage stopped`;
  return head;
}

export function buildSideReport(
  stage: StagePlan,
  side: SideName,
  result: LoadResult,
  usage: SideUsage,
): SideReport {
  const { outcomes } = result;
  const seconds = result.durationSec;
  const achievedRps = outcomes.finished / seconds;
  const keptUp = stage.targetRps === null || achievedRps >= KEEP_UP_RATIO * stage.targetRps;
  const report: SideReport = {
    requests: outcomes.finished,
    ok: outcomes.ok,
    errors: { ...outcomes.errors } as Record<string, number>,
    successPct: outcomes.finished === 0 ? 0 : round((100 * outcomes.ok) / outcomes.finished, 4),
    sent: outcomes.sent,
    missedSlots: result.missedSlots,
    offeredRps: round(outcomes.sent / seconds, 2),
    achievedRps: round(achievedRps, 2),
    durationSec: round(seconds, 3),
    bytes: outcomes.bytes,
    latencyMs: roundLatency(result.latency),
    correctedLatencyMs: roundLatency(result.correctedLatency),
    correctedP99Ms: round(result.correctedLatency.p99),
    latencySamples: result.latencySamples,
    lowSamplePercentiles: lowSamplePercentiles(result.latencySamples),
    keptUp,
    shortfall: keptUp ? null : shortfallReason(stage, side, result, usage.generator, achievedRps),
    backend: usageReport(usage.backend, outcomes.finished),
    generator: {
      ...usageReport(usage.generator, outcomes.finished)!,
      eventLoopDelayP99Ms: round(result.generatorLoopDelayP99Ms, 2),
    },
  };
  if (side === 'tunnel') {
    report.edge = usageReport(usage.edge, outcomes.finished);
    report.agent = usageReport(usage.agent, outcomes.finished);
    report.tunnelCpuPerRequestUs =
      usage.edge === null || usage.agent === null
        ? null
        : perRequestUs(usage.edge.cpuMs + usage.agent.cpuMs, outcomes.finished);
  }
  if (usage.generator.machine !== undefined) {
    const { loadAverageBefore, loadAverageAfter, busyCpuPct } = usage.generator.machine;
    report.machine = {
      loadAverageBefore: round(loadAverageBefore, 2),
      loadAverageAfter: round(loadAverageAfter, 2),
      busyCpuPct,
    };
  }
  // Last: it is the long part of a side's record.
  report.perSecond = result.perSecond;
  return report;
}

const ratio = (a: number, b: number): number => (b === 0 ? 0 : round(a / b, 3));

export function compareSides(direct: SideReport | null, tunnel: SideReport | null): Comparison | null {
  if (direct === null || tunnel === null) return null;
  return {
    throughputRatio: ratio(tunnel.achievedRps, direct.achievedRps),
    addedP50Ms: round(tunnel.latencyMs.p50 - direct.latencyMs.p50),
    addedP99Ms: round(tunnel.latencyMs.p99 - direct.latencyMs.p99),
    addedCorrectedP99Ms: round(tunnel.correctedP99Ms - direct.correctedP99Ms),
    p50Ratio: ratio(tunnel.latencyMs.p50, direct.latencyMs.p50),
    p99Ratio: ratio(tunnel.latencyMs.p99, direct.latencyMs.p99),
  };
}

/** The inspector's cost: the tunnel side with it on against the same load with it off. */
export function compareInspector(off: SideReport | null, on: SideReport | null): InspectorCost | null {
  if (off === null || on === null) return null;
  const cpu = (a: number | null | undefined, b: number | null | undefined): number | null =>
    a == null || b == null || b === 0 ? null : round(a / b, 3);
  return {
    throughputRatio: ratio(on.achievedRps, off.achievedRps),
    agentCpuRatio: cpu(on.agent?.cpuPerRequestUs, off.agent?.cpuPerRequestUs),
    tunnelCpuRatio: cpu(on.tunnelCpuPerRequestUs, off.tunnelCpuPerRequestUs),
  };
}

export function totalsOf(stages: StageReport[], side: SideName): SideTotals | null {
  const reports = stages.map((s) => s[side]).filter((r): r is SideReport => r !== null);
  if (reports.length === 0) return null;
  const errors: Record<string, number> = {};
  let requests = 0;
  let ok = 0;
  for (const r of reports) {
    requests += r.requests;
    ok += r.ok;
    for (const [kind, n] of Object.entries(r.errors)) errors[kind] = (errors[kind] ?? 0) + n;
  }
  return { requests, ok, errors, successPct: requests === 0 ? 0 : round((100 * ok) / requests, 4) };
}
