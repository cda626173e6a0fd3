import type { BenchStack, LoadTarget } from './bench-stack.js';
import type { BenchOptions } from './cli-args.js';
import { BenchError, BenchErrorCode } from './errors.js';
import { runLoad } from './load-runner.js';
import { meterProcess, meterSelf, type UsageMeter } from './process-stats.js';
import type { Progress } from './progress.js';
import type { SideName, SideReport, StageReport } from './report-schema.js';
import type { StagePlan } from './scenarios.js';
import { buildSideReport, compareSides } from './side-report.js';

export interface ScenarioRun {
  stages: StageReport[];
  /** Why the run stopped early, or null. */
  aborted: string | null;
}

function targetOf(stack: BenchStack, side: SideName): LoadTarget {
  const target = side === 'direct' ? stack.direct : stack.tunnel;
  if (target === undefined) throw new BenchError(BenchErrorCode.STACK, `the ${side} side was not started`);
  return target;
}

/** The first process of the stack that is no longer running, described with its last stderr. */
function deadProcess(stack: BenchStack): string | null {
  for (const service of [stack.backend, stack.edge, stack.agent]) {
    if (service !== undefined && !service.alive()) {
      const tail = service.stderrTail();
      return `${service.name} exited${tail ? `: ${tail.split('\n').slice(-3).join(' | ')}` : ''}`;
    }
  }
  return null;
}

/**
 * Runs every stage against each side, one side after the other within a stage (same parameters), so both
 * sides see the machine in the same state. Each side gets a discarded warm-up right before its first stage.
 */
export async function runScenario(
  options: BenchOptions,
  plan: StagePlan[],
  stack: BenchStack,
  progress: Progress,
): Promise<ScenarioRun> {
  const stages: StageReport[] = [];
  for (const stage of plan) {
    const sides: Record<SideName, SideReport | null> = { direct: null, tunnel: null };
    for (const side of options.sides) {
      const target = targetOf(stack, side);
      if (stage.index === 1 && options.warmupSec > 0) {
        progress.note(`warm-up ${side}: ${options.warmupSec} s at the first stage's load (discarded)`);
        await runLoad({
          target,
          path: options.path,
          connections: stage.connections,
          durationSec: options.warmupSec,
          ratePerSec: stage.targetRps ?? undefined,
          timeoutSec: options.timeoutSec,
          onTick: (tick) =>
            progress.tick(
              { stage, stageCount: plan.length, side, warmup: true, totalSec: options.warmupSec },
              tick,
            ),
        });
      }
      const meters: Record<'backend' | 'edge' | 'agent', UsageMeter | undefined> = {
        backend: meterProcess(stack.backend.pid),
        edge: side === 'tunnel' && stack.edge ? meterProcess(stack.edge.pid) : undefined,
        agent: side === 'tunnel' && stack.agent ? meterProcess(stack.agent.pid) : undefined,
      };
      const self = meterSelf();
      const result = await runLoad({
        target,
        path: options.path,
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
      sides[side] = report;
      progress.stageDone(stage, plan.length, side, report);
      const dead = deadProcess(stack);
      if (dead !== null) {
        stages.push(toStageReport(stage, sides));
        return { stages, aborted: `${dead} (during stage ${stage.index}, ${side} side)` };
      }
    }
    stages.push(toStageReport(stage, sides));
  }
  return { stages, aborted: null };
}

function toStageReport(stage: StagePlan, sides: Record<SideName, SideReport | null>): StageReport {
  return {
    index: stage.index,
    mode: stage.mode,
    targetRps: stage.targetRps,
    connections: stage.connections,
    durationSec: stage.durationSec,
    direct: sides.direct,
    tunnel: sides.tunnel,
    comparison: compareSides(sides.direct, sides.tunnel),
  };
}
