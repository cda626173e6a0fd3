import { BenchError, BenchErrorCode } from '../errors.js';
import { runLoad } from '../measure/load-runner.js';
import { meterProcess, meterProcesses, meterSelf, type UsageMeter } from '../measure/process-stats.js';
import { buildSideReport, compareInspector, compareSides } from '../measure/side-report.js';
import type { BenchOptions } from '../plan/cli-args.js';
import type { SideName, SideReport, StageReport } from '../plan/report-schema.js';
import type { StagePlan } from '../plan/scenarios.js';
import type { WarmupPlan } from '../plan/warmup-plan.js';
import type { LoadTarget } from '../stacks/bench-stack.js';
import type { ChildService } from '../stacks/child-service.js';
import type { Progress } from './progress.js';
import type { ScenarioStack } from './target-stack.js';

export interface ScenarioRun {
  stages: StageReport[];
  /** Why the run stopped early, or null. */
  aborted: string | null;
}

/** One measured leg of a stage: a side, and for `--inspect both` the tunnel side once more with it off. */
type LegName = SideName | 'tunnelInspectorOff';

interface Leg {
  name: LegName;
  side: SideName;
  target: LoadTarget;
  agent: ChildService | undefined;
}

/**
 * The legs of a stage, in the order they run: direct, then the tunnel with the inspector off before it on;
 * from the second stage on the two tunnel legs take turns going first, so the machine's drift during a run
 * (the later leg of a pair met a busier or a calmer machine) falls on each alike over a run of even length
 * (`max --connections 50,50,50,50 --inspect both`: four pairs, two in each order).
 */
function legsOf(options: BenchOptions, stack: ScenarioStack, stageIndex: number): Leg[] {
  const legs: Leg[] = [];
  for (const side of options.sides) {
    const target = side === 'direct' ? stack.direct : stack.tunnel;
    if (target === undefined) throw new BenchError(BenchErrorCode.STACK, `the ${side} side was not started`);
    const leg: Leg = { name: side, side, target, agent: side === 'tunnel' ? stack.agent : undefined };
    if (side === 'tunnel' && stack.tunnelInspectorOff !== undefined) {
      const agent = stack.agentInspectorOff;
      const off: Leg = { name: 'tunnelInspectorOff', side, target: stack.tunnelInspectorOff, agent };
      legs.push(...(stageIndex % 2 === 1 ? [off, leg] : [leg, off]));
    } else legs.push(leg);
  }
  return legs;
}

/** The first process of the stack that is no longer running, described with its last stderr. */
function deadProcess(stack: ScenarioStack): string | null {
  const replicas = [...(stack.replicaBackends ?? []), ...(stack.replicaAgents ?? [])];
  for (const service of [stack.backend, stack.edge, stack.agent, stack.agentInspectorOff, ...replicas]) {
    if (service !== undefined && !service.alive()) {
      const tail = service.stderrTail();
      return `${service.name} exited${tail ? `: ${tail.split('\n').slice(-3).join(' | ')}` : ''}`;
    }
  }
  return null;
}

/**
 * A side that got no answer at all in a stage (every request refused, reset or timed out): the service
 * behind it is gone, and later stages would only count the same errors. Any HTTP answer, even a 500, is a
 * measurement and does not stop the run.
 */
function unanswered(report: SideReport): string | null {
  const answered =
    report.ok + Object.entries(report.errors).filter(([kind]) => kind.startsWith('http_')).length;
  if (report.requests === 0 || answered > 0) return null;
  const errors = Object.entries(report.errors)
    .map(([kind, n]) => `${kind} ${n}`)
    .join(', ');
  return `no request got an answer (${errors}): is the service still running?`;
}

/**
 * Runs every stage against each side, one side after the other within a stage (same parameters), so both
 * sides see the machine in the same state. Each side gets a discarded warm-up at the stage's load right
 * before a stage, as long as `warmup` says (see warmup-plan.ts).
 */
export async function runScenario(
  options: BenchOptions,
  plan: StagePlan[],
  stack: ScenarioStack,
  progress: Progress,
  warmup: WarmupPlan,
): Promise<ScenarioRun> {
  const stages: StageReport[] = [];
  for (const stage of plan) {
    const legs = legsOf(options, stack, stage.index);
    const warmupSec = warmup.secondsFor(stage);
    const sides: Record<LegName, SideReport | null> = {
      direct: null,
      tunnel: null,
      tunnelInspectorOff: null,
    };
    for (const { name, side, target, agent } of legs) {
      const label = name === 'tunnelInspectorOff' ? 'tunnel (inspector off)' : side;
      if (warmupSec > 0) {
        progress.note(`warm-up ${label}: ${warmupSec} s at stage ${stage.index}'s load (discarded)`);
        await runLoad({
          target,
          path: options.path,
          request: options.request,
          connections: stage.connections,
          durationSec: warmupSec,
          ratePerSec: stage.targetRps ?? undefined,
          timeoutSec: options.timeoutSec,
          onTick: (tick) =>
            progress.tick({ stage, stageCount: plan.length, side, warmup: true, totalSec: warmupSec }, tick),
        });
      }
      const meters: Record<'backend' | 'edge' | 'agent', UsageMeter | undefined> = {
        // The user's own service (--target) is not the kit's process: its CPU is theirs to watch.
        // With --replicas, the backends and the agents serving the name count together.
        backend:
          stack.backend === undefined
            ? undefined
            : meterProcesses([stack.backend, ...(stack.replicaBackends ?? [])].map((s) => s.pid)),
        edge: side === 'tunnel' && stack.edge ? meterProcess(stack.edge.pid) : undefined,
        agent:
          side === 'tunnel' && agent
            ? meterProcesses(
                [agent, ...(agent === stack.agent ? (stack.replicaAgents ?? []) : [])].map((s) => s.pid),
              )
            : undefined,
      };
      const self = meterSelf();
      const result = await runLoad({
        target,
        path: options.path,
        request: options.request,
        connections: stage.connections,
        durationSec: stage.durationSec,
        ratePerSec: stage.targetRps ?? undefined,
        timeoutSec: options.timeoutSec,
        onTick: (tick) =>
          progress.tick(
            { stage, stageCount: plan.length, side, warmup: false, totalSec: stage.durationSec },
            tick,
          ),
      });
      const report = buildSideReport(stage, side, result, {
        backend: meters.backend?.stop() ?? null,
        edge: meters.edge?.stop() ?? null,
        agent: meters.agent?.stop() ?? null,
        generator: self.stop()!,
      });
      sides[name] = report;
      progress.stageDone(stage, plan.length, label, report);
      const dead = deadProcess(stack) ?? unanswered(report);
      if (dead !== null) {
        stages.push(toStageReport(stage, warmupSec, sides, stack));
        return { stages, aborted: `${dead} (during stage ${stage.index}, ${label} side)` };
      }
    }
    stages.push(toStageReport(stage, warmupSec, sides, stack));
  }
  return { stages, aborted: null };
}

function toStageReport(
  stage: StagePlan,
  warmupSec: number,
  sides: Record<LegName, SideReport | null>,
  stack: ScenarioStack,
): StageReport {
  const report: StageReport = {
    index: stage.index,
    mode: stage.mode,
    targetRps: stage.targetRps,
    connections: stage.connections,
    durationSec: stage.durationSec,
    warmupSec,
    direct: sides.direct,
    tunnel: sides.tunnel,
    comparison: compareSides(sides.direct, sides.tunnel),
  };
  if (stack.tunnelInspectorOff !== undefined) {
    report.tunnelInspectorOff = sides.tunnelInspectorOff;
    report.inspectorCost = compareInspector(sides.tunnelInspectorOff, sides.tunnel);
  }
  return report;
}
