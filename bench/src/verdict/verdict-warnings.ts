import type { SideReport, StageReport, VerdictRules, VerdictWarning } from '../plan/report-schema.js';
import { samplesNeeded } from '../plan/sample-sufficiency.js';
import { ms, p99Limit, p99Of } from './side-hold.js';

/** A CPU time under this many ms is fewer than 10 of the kernel's 10 ms clock ticks: ±10 % or worse. */
const MIN_CPU_MS = 100;
/** A stage whose CPU per request is this many times the run's cheapest is paying mostly for idling. */
const IDLE_RATIO = 2;

/** What the warnings need besides the stages. */
export interface WarningContext {
  rules: VerdictRules;
  targetGiven: boolean;
}

function lowSamples(stage: StageReport): VerdictWarning | null {
  const flagged = (['direct', 'tunnel'] as const).filter(
    (name) => stage[name]?.lowSamplePercentiles?.includes('p99') === true,
  );
  if (flagged.length === 0) return null;
  const counts = flagged.map((name) => `${stage[name]!.latencySamples ?? stage[name]!.requests} (${name})`);
  return {
    kind: 'low-samples',
    stages: [stage.index],
    text: `stage ${stage.index}: p99 read from ${counts.join(', ')} answers`,
  };
}

const tunnelCpuMs = (side: SideReport): number | null =>
  side.edge == null || side.agent == null ? null : side.edge.cpuMs + side.agent.cpuMs;

/**
 * The tunnel's CPU per request at a low rate is mostly what the edge and the agent spend idling (timers,
 * heartbeats, GC) divided by few requests: twice the run's cheapest stage, or under 10 clock ticks.
 */
function idleCpu(stage: StageReport, stages: readonly StageReport[]): VerdictWarning | null {
  const tunnel = stage.tunnel;
  const perRequest = tunnel?.tunnelCpuPerRequestUs;
  const cpuMs = tunnel ? tunnelCpuMs(tunnel) : null;
  if (tunnel === null || perRequest == null || cpuMs === null) return null;
  let cheapest: StageReport | null = null;
  for (const other of stages) {
    const us = other.tunnel?.tunnelCpuPerRequestUs;
    if (us == null) continue;
    if (cheapest === null || us < (cheapest.tunnel!.tunnelCpuPerRequestUs as number)) cheapest = other;
  }
  const cheapestUs = cheapest?.tunnel?.tunnelCpuPerRequestUs ?? null;
  const idle =
    cheapest !== null &&
    cheapestUs !== null &&
    cheapest.index !== stage.index &&
    perRequest >= IDLE_RATIO * cheapestUs &&
    tunnel.achievedRps < cheapest.tunnel!.achievedRps;
  const coarse = cpuMs < MIN_CPU_MS;
  if (!idle && !coarse) return null;
  const why: string[] = [];
  if (idle) {
    why.push(
      `${(perRequest / cheapestUs!).toFixed(1)}× the ${cheapestUs!.toFixed(0)} µs of stage ${cheapest!.index} ` +
        `(${tunnel.achievedRps.toFixed(0)} against ${cheapest!.tunnel!.achievedRps.toFixed(0)} RPS)`,
    );
  }
  if (coarse) why.push(`only ${cpuMs.toFixed(0)} ms of CPU measured`);
  return {
    kind: 'idle-cpu',
    stages: [stage.index],
    text: `stage ${stage.index}: ${perRequest.toFixed(0)} µs per request, ${why.join('; ')}`,
  };
}

/** CPU the machine spent outside the run's own processes during a side, in % of one core; null if unknown. */
export function otherCpuPct(side: SideReport): number | null {
  const busy = side.machine?.busyCpuPct;
  if (busy === null || busy === undefined) return null;
  const own = [side.generator, side.backend, side.edge, side.agent].reduce(
    (sum, usage) => sum + (usage?.cpuPct ?? 0),
    0,
  );
  return Math.max(0, busy - own);
}

function busyMachine(stage: StageReport, context: WarningContext): VerdictWarning | null {
  const sides = (['direct', 'tunnel'] as const).filter((name) => stage[name] !== null);
  const others = sides.map((name) => ({ name, other: otherCpuPct(stage[name]!) }));
  const busy = others.filter(({ other }) => other !== null && other > context.rules.busyOtherCpuPct);
  if (busy.length === 0) return null;
  const first = stage[sides[0]!]!.machine!;
  const last = stage[sides[sides.length - 1]!]!.machine!;
  return {
    kind: 'busy-machine',
    stages: [stage.index],
    text:
      `stage ${stage.index}: ${busy
        .map(({ name, other }) => `${other!.toFixed(0)} % of a core outside the run during the ${name} side`)
        .join(', ')}${context.targetGiven ? ' (your --target counts here)' : ''}, load average ` +
      `${first.loadAverageBefore.toFixed(2)} before, ${last.loadAverageAfter.toFixed(2)} after`,
  };
}

/** A latency limit this many times the one the side's lowest later p99 would set was lifted by noise. */
const LOOSE_RATIO = 2;

/**
 * The side's first p99 sets its latency limit (p99Limit); one that a GC pause, a neighbour's burst or too
 * few answers lifted (72 ms over 200 answers at load 10, then 5.4 ms at the next stage) sets a limit so
 * loose that a later bend in latency alone passes unseen. Null when the limit is the floor anyway.
 */
export function looseBaseline(
  stages: readonly StageReport[],
  name: 'direct' | 'tunnel',
  rules: VerdictRules,
): VerdictWarning | null {
  const ran = stages.filter((stage) => stage[name] !== null);
  const first = ran[0];
  if (first === undefined) return null;
  const base = p99Of(first, first[name]!);
  const limit = p99Limit(base, rules);
  if (limit <= rules.p99FloorMs) return null;
  let lowest: { p99: number; index: number } | null = null;
  for (const stage of ran.slice(1)) {
    const p99 = p99Of(stage, stage[name]!);
    if (lowest === null || p99 < lowest.p99) lowest = { p99, index: stage.index };
  }
  if (lowest === null) return null;
  const truer = p99Limit(lowest.p99, rules);
  if (limit <= LOOSE_RATIO * truer) return null;
  return {
    kind: 'loose-baseline',
    stages: [first.index],
    text:
      `the ${name} side's first-stage p99 (${ms(base)} ms) is ${(base / lowest.p99).toFixed(1)}× its lowest ` +
      `later one (${ms(lowest.p99)} ms at stage ${lowest.index}): the latency limit it sets (${ms(limit)} ms) ` +
      `is ${(limit / truer).toFixed(1)}× the ${ms(truer)} ms that one would set, so a later bend in latency ` +
      'alone can pass unseen; a longer first stage, or one at a lower rate, sets a truer limit',
  };
}

/** The warnings of one stage, each with its figures only (`explained` adds what it means). */
export function stageWarnings(
  stage: StageReport,
  stages: readonly StageReport[],
  context: WarningContext,
): VerdictWarning[] {
  return [lowSamples(stage), idleCpu(stage, stages), busyMachine(stage, context)].filter(
    (w): w is VerdictWarning => w !== null,
  );
}

/** What each kind of warning means for the reading, said once after its stages' figures. */
const MEANING: Record<VerdictWarning['kind'], string> = {
  'low-samples': `a p99 needs ${samplesNeeded('p99').toLocaleString('en-US')} answers (10 beyond it): below that it is the slowest few requests, and the latency criterion is rough`,
  'idle-cpu':
    "the tunnel's CPU per request there is idle-dominated: the edge's and agent's idle work (timers, heartbeats, GC) shared by few requests, or too few 10 ms clock ticks; read it at a higher stage",
  'busy-machine':
    'the machine was busy: other processes took CPU the run could have used, so its figures (latency most) are worse than on a quiet machine',
  'no-direct-side': '',
  'loose-baseline': '',
  'not-metered': '',
};

/** Adds what the kind means to a stage's warning (the run-level ones already say it). */
export function explained(warning: VerdictWarning): VerdictWarning {
  const meaning = MEANING[warning.kind];
  return meaning === '' ? warning : { ...warning, text: `${warning.text}: ${meaning}` };
}

/** The run's warnings: one per kind, naming its stages with each stage's figures, then what it means. */
export function mergeWarnings(warnings: readonly VerdictWarning[]): VerdictWarning[] {
  const byKind = new Map<VerdictWarning['kind'], VerdictWarning[]>();
  for (const warning of warnings) byKind.set(warning.kind, [...(byKind.get(warning.kind) ?? []), warning]);
  return [...byKind].map(([kind, list]) =>
    explained({ kind, stages: list.flatMap((w) => w.stages), text: list.map((w) => w.text).join('; ') }),
  );
}
