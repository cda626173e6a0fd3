import type {
  Saturated,
  SaturatedProcess,
  SideHold,
  SideReport,
  StageReport,
  VerdictRules,
} from '../plan/report-schema.js';
import { demandPct, demandText } from './verdict-rules.js';
import { otherCpuPct } from './verdict-warnings.js';

/** What gave out at one stage, where, and why this reading. */
export interface StageReading {
  saturated: Saturated;
  process: SaturatedProcess | null;
  reason: string;
}

/** What the reading needs besides the stage. */
export interface ReadingContext {
  rules: VerdictRules;
  /** --target: the backend is the user's service, whose CPU the kit does not meter. */
  targetGiven: boolean;
}

const hard = (hold: SideHold | null): boolean =>
  hold !== null && (hold.bend === 'rate' || hold.bend === 'errors');
const bent = (hold: SideHold | null): boolean => hold !== null && !hold.held;

/** The generator set the pace on a side: it wanted a whole core (demandPct). */
function generatorBusy(side: SideReport, rules: VerdictRules): boolean {
  return (demandPct(side.generator) ?? 0) >= rules.nearCorePct;
}

function generatorReading(side: SideReport, name: string): StageReading {
  return {
    saturated: 'generator',
    process: 'generator',
    reason:
      `the load generator was saturated on the ${name} side (event-loop delay p99 ` +
      `${side.generator.eventLoopDelayP99Ms.toFixed(0)} ms, ${demandText(side.generator)}): ` +
      'it, not the stack, set the pace, so this stage measures it',
  };
}

function backendReading(side: SideReport, hold: SideHold, context: ReadingContext): StageReading {
  let where: string;
  if (side.backend === null) {
    where = context.targetGiven ? 'its CPU is not metered (--target)' : 'its CPU is not known';
  } else {
    const demand = demandPct(side.backend) ?? 0;
    // Far from a core and waiting for one more than running: starved by other work, not sleeping.
    const starved = (side.backend.runQueueWaitPct ?? 0) > side.backend.cpuPct;
    where =
      demand >= context.rules.nearCorePct
        ? `backend ${demandText(side.backend)}, near a core`
        : starved
          ? `backend ${demandText(side.backend)}: other work on the machine, not the backend's own limit, set its pace`
          : `backend ${demandText(side.backend)}: it waits rather than computes (a sleep, a lock, few workers)`;
  }
  return {
    saturated: 'backend',
    process: 'backend',
    reason: `the direct side bent (${hold.reason}): the backend is the limit; ${where}`,
  };
}

function tunnelReading(
  tunnel: SideReport,
  hold: SideHold,
  directHold: SideHold | null,
  context: ReadingContext,
): StageReading {
  const edge = demandPct(tunnel.edge);
  const agent = demandPct(tunnel.agent);
  const direct = directHold?.held === true ? 'held' : 'bent only in latency';
  const head =
    directHold === null
      ? `the tunnel side bent (${hold.reason})`
      : `the direct side ${direct} (${directHold.reason}) while the tunnel bent (${hold.reason})`;
  if (edge === null && agent === null) {
    return {
      saturated: 'tunnel',
      process: null,
      reason: `${head}; the edge and agent are not metered, so which one cannot be said`,
    };
  }
  const name: 'edge' | 'agent' = (agent ?? -1) >= (edge ?? -1) ? 'agent' : 'edge';
  const usage = (name === 'agent' ? tunnel.agent : tunnel.edge)!;
  const near = (demandPct(usage) ?? 0) >= context.rules.nearCorePct;
  // Far from a core but waiting for one more than running: the machine's other work slowed the tunnel.
  const starved = (usage.runQueueWaitPct ?? 0) > usage.cpuPct;
  const elsewhere = starved
    ? "other work on the machine, not the tunnel's own limit, set its pace"
    : 'the limit is elsewhere in the tunnel (its windows, its connections)';
  return {
    saturated: 'tunnel',
    process: name,
    reason: near
      ? `${head}; the ${name} is the limit: ${demandText(usage)}, near a core`
      : `${head}; neither edge nor agent was near a core (the busier, the ${name}: ${demandText(usage)}), so ${elsewhere}`,
  };
}

/** Only the tunnel side ran: the backend and the tunnel are told apart by their CPU alone. */
function tunnelOnlyReading(tunnel: SideReport, hold: SideHold, context: ReadingContext): StageReading {
  const near = context.rules.nearCorePct;
  const backend = demandPct(tunnel.backend);
  const tunnelNear = Math.max(demandPct(tunnel.edge) ?? 0, demandPct(tunnel.agent) ?? 0) >= near;
  if (!tunnelNear && backend !== null && backend >= near) {
    return {
      saturated: 'backend',
      process: 'backend',
      reason: `the tunnel side bent (${hold.reason}) with its backend near a core (${demandText(tunnel.backend!)})`,
    };
  }
  if (tunnelNear) return tunnelReading(tunnel, hold, null, context);
  return {
    saturated: 'unknown',
    process: null,
    reason:
      `the tunnel side bent (${hold.reason}), and with no direct side and no process near a core the ` +
      'backend and the tunnel cannot be told apart',
  };
}

/**
 * A side that kept its rate and its answers but bent in latency alone, with none of its processes near a
 * core, on a machine where other work took more than busyOtherCpuPct of a core: that work lifts a p99 past
 * the limit as readily as the backend or the tunnel would, so the bend is not placed (`unknown`) rather than
 * blamed on the side's own processes.
 */
function softBendOnBusyMachine(
  stage: StageReport,
  name: 'direct' | 'tunnel',
  hold: SideHold,
  reading: StageReading,
  rules: VerdictRules,
): StageReading {
  const side = stage[name];
  if (hold.bend !== 'latency' || side === null) return reading;
  const processes = [side.backend, side.edge, side.agent];
  if (processes.some((usage) => (demandPct(usage) ?? 0) >= rules.nearCorePct)) return reading;
  const other = Math.max(
    0,
    ...[stage.direct, stage.tunnel].map((s) => (s === null ? 0 : (otherCpuPct(s) ?? 0))),
  );
  if (other <= rules.busyOtherCpuPct) return reading;
  const blamed = name === 'direct' ? 'the backend' : 'the tunnel';
  return {
    saturated: 'unknown',
    process: null,
    reason:
      `the ${name} side bent only in latency (${hold.reason}) with no process near a core while ` +
      `${other.toFixed(0)} % of a core was used outside the run: the machine's other work explains it as well as ${blamed} does`,
  };
}

/**
 * Reads one stage. In order: every side held (none); every side bent while the generator wanted a whole
 * core (generator); the direct side bent hard, or only softly while the tunnel did not bend hard (backend, which
 * the tunnel carries too); the tunnel bent (tunnel, in the edge or the agent, whichever wanted more CPU).
 * A bend in latency alone on a busy machine with no process near a core is not placed (softBendOnBusyMachine).
 */
export function readStage(
  stage: StageReport,
  holds: { direct: SideHold | null; tunnel: SideHold | null },
  context: ReadingContext,
): StageReading {
  const { direct, tunnel } = holds;
  const { rules } = context;
  if (!bent(direct) && !bent(tunnel)) {
    const sides = [direct && 'direct', tunnel && 'tunnel'].filter(Boolean).join(' and ');
    return { saturated: 'none', process: null, reason: `${sides} held the stage` };
  }
  // The generator is the same on both sides: when it is the limit, every side that ran bent.
  const ran = (['direct', 'tunnel'] as const).filter((name) => stage[name] !== null);
  const everyBent = ran.every((name) => bent(holds[name]));
  for (const name of ran) {
    const side = stage[name]!;
    if (everyBent && generatorBusy(side, context.rules)) return generatorReading(side, name);
  }
  if (direct !== null && stage.direct !== null && (hard(direct) || (bent(direct) && !hard(tunnel)))) {
    return softBendOnBusyMachine(
      stage,
      'direct',
      direct,
      backendReading(stage.direct, direct, context),
      rules,
    );
  }
  if (tunnel === null || stage.tunnel === null) {
    return { saturated: 'unknown', process: null, reason: 'no side bent that this reading can place' };
  }
  const reading =
    direct === null
      ? tunnelOnlyReading(stage.tunnel, tunnel, context)
      : tunnelReading(stage.tunnel, tunnel, direct, context);
  return softBendOnBusyMachine(stage, 'tunnel', tunnel, reading, rules);
}
