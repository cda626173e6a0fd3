import type { LoadTick } from '../measure/load-runner.js';
import type { ScenarioName, SideName, SideReport } from '../plan/report-schema.js';
import { LOW_SAMPLE_MARK, type PercentileKey, samplesNeeded } from '../plan/sample-sufficiency.js';
import type { StagePlan } from '../plan/scenarios.js';

/** What the run tells a person watching it (on stderr, so stdout stays free for the report path). */
export interface Progress {
  /** A step of the run: starting the stack, writing reports. */
  note(text: string): void;
  /** About once a second while load runs. */
  tick(at: TickContext, tick: LoadTick): void;
  /** `label`: the side's name, or which tunnel leg (`tunnel (inspector off)` with `--inspect both`). */
  stageDone(stage: StagePlan, stageCount: number, label: string, report: SideReport): void;
}

export interface TickContext {
  stage: StagePlan;
  stageCount: number;
  side: SideName;
  /** The discarded load before the first stage of a side. */
  warmup: boolean;
  /** How long this load runs. */
  totalSec: number;
}

export interface ProgressOptions {
  write: (text: string) => void;
  /** A terminal: the tick line is rewritten in place. Otherwise (CI logs) a tick line is printed every few seconds. */
  interactive: boolean;
  /** Seconds between tick lines when not interactive. */
  logEverySec?: number;
}

const fmt = (n: number, digits = 1): string => n.toFixed(digits);

export function formatLoad(stage: StagePlan): string {
  return stage.targetRps === null
    ? `closed loop × ${stage.connections} conn`
    : `${stage.targetRps} rps × ${stage.connections} conn`;
}

export function createProgress(scenario: ScenarioName, options: ProgressOptions): Progress {
  const logEvery = options.logEverySec ?? 5;
  let lastLogged = -Infinity;
  let lineOpen = false;
  const prefix = `[${scenario}]`;
  const line = (text: string): void => {
    if (lineOpen) options.write('\r\x1b[K');
    lineOpen = false;
    options.write(`${text}\n`);
  };
  return {
    note(text) {
      line(`${prefix} ${text}`);
    },
    tick(at, tick) {
      const label = at.warmup ? `warm-up ${at.side}` : `stage ${at.stage.index}/${at.stageCount} ${at.side}`;
      const text =
        `${prefix} ${label}  ${formatLoad(at.stage)}  ${fmt(tick.elapsedSec)}/${at.totalSec} s  now ${fmt(tick.currentRps)} rps  done ${tick.finished}  errors ${tick.errors}` +
        `  p99 ${fmt(tick.p99Ms, 2)} ms`;
      if (options.interactive) {
        options.write(`\r\x1b[K${text}`);
        lineOpen = true;
        return;
      }
      // A new load (the stage after its warm-up) starts its clock again: log its first tick too.
      if (tick.elapsedSec < lastLogged) lastLogged = -Infinity;
      if (tick.elapsedSec - lastLogged >= logEvery) {
        lastLogged = tick.elapsedSec;
        line(text);
      }
    },
    stageDone(stage, stageCount, label, report) {
      lastLogged = -Infinity;
      const errors = Object.entries(report.errors)
        .map(([kind, n]) => `${kind} ${n}`)
        .join(', ');
      line(
        `${prefix} stage ${stage.index}/${stageCount} ${label} done: ${report.requests} requests, ` +
          `${fmt(report.successPct, 2)} % ok${errors ? ` (${errors})` : ''}, ${fmt(report.achievedRps)} rps, ` +
          `p50 ${fmt(report.latencyMs.p50, 2)} ms${mark(report, 'p50')}, ` +
          `p99 ${fmt(report.latencyMs.p99, 2)} ms${mark(report, 'p99')} ` +
          `(corrected ${fmt(report.correctedP99Ms, 2)} ms${mark(report, 'p99')}${fewText(report)})${cpuText(report)}` +
          `${report.keptUp ? '' : `  SHORT: ${report.shortfall}`}`,
      );
    },
  };
}

/** " ~" after a percentile read from too few samples, as report.md and report.html mark it. */
function mark(report: SideReport, key: PercentileKey): string {
  return report.lowSamplePercentiles?.includes(key) ? ` ${LOW_SAMPLE_MARK}` : '';
}

/** "; 61 answers, a p99 needs 1,000" when the p99 is marked: the line is read before any report. */
function fewText(report: SideReport): string {
  if (!report.lowSamplePercentiles?.includes('p99')) return '';
  const needed = samplesNeeded('p99').toLocaleString('en-US');
  return `; ${(report.latencySamples ?? report.requests).toLocaleString('en-US')} answers, a p99 needs ${needed}`;
}

/** ", tunnel CPU 262 µs/req (edge 116 + agent 146)", or the backend's on the direct side; "" when unknown. */
function cpuText(report: SideReport): string {
  const us = (n: number | null | undefined): string => (n === null || n === undefined ? '?' : n.toFixed(0));
  if (report.tunnelCpuPerRequestUs !== undefined) {
    if (report.tunnelCpuPerRequestUs === null) return '';
    return (
      `, tunnel CPU ${us(report.tunnelCpuPerRequestUs)} µs/req ` +
      `(edge ${us(report.edge?.cpuPerRequestUs)} + agent ${us(report.agent?.cpuPerRequestUs)})`
    );
  }
  const backend = report.backend?.cpuPerRequestUs;
  return backend === null || backend === undefined ? '' : `, backend CPU ${us(backend)} µs/req`;
}
