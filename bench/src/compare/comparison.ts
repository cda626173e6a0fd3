import { runDifferences } from './differences.js';
import { type FigureKind, higherIsBetter } from './figure-kind.js';
import { type Figure, reportFigures } from './figures.js';
import type { LoadedReport } from './report-input.js';

/**
 * Two reports of one scenario, figure by figure. A change counts as beyond the noise when it is larger
 * than the noise band: the larger of MIN_NOISE_PCT and the noise either report shows for that figure
 * (figures.ts: its repetitions' spread, or its stage's seconds), and for CPU per request what the kit's
 * own processes beside it moved by (CONTROLS). A regression is a gated figure (p99,
 * throughput, CPU per request, RSS: figure-kind.ts) that moved the worse way by more than `maxRegressPct`
 * and beyond the noise, and whose percentile neither report marks as read from too few samples.
 */

/** The band below which no change is called real, however steady both runs look. */
export const MIN_NOISE_PCT = 5;
/** `--max-regress` when not given: the default threshold. */
export const DEFAULT_MAX_REGRESS_PCT = 20;

export type Mark = 'regression' | 'worse' | 'better' | 'changed' | '';

export interface ComparedFigure {
  key: string;
  kind: FigureKind;
  base: number;
  head: number;
  /** (head − base) / |base| in %; null when base is 0 and head is not. */
  changePct: number | null;
  /** The noise band of this figure, in %. */
  noisePct: number;
  beyondNoise: boolean;
  /** A percentile one of the reports read from too few samples: shown, never gated. */
  lowSample: boolean;
  mark: Mark;
}

export interface ReportRef {
  file: string;
  command: string | null;
  startedAt: string | null;
}

export interface Comparison {
  scenario: string;
  base: ReportRef;
  head: ReportRef;
  maxRegressPct: number;
  minNoisePct: number;
  /** Every figure both reports have, in the base report's order. */
  figures: ComparedFigure[];
  regressions: ComparedFigure[];
  /** Figures only one of the two has (a side or stage the other did not run, a field it did not know). */
  onlyInBase: number;
  onlyInHead: number;
  /** What differs between the runs besides the code: the machine, the settings (differences.ts). */
  differences: string[];
  passed: boolean;
}

const ref = (r: LoadedReport): ReportRef => ({ file: r.file, command: r.command, startedAt: r.startedAt });

/**
 * The CPU per request of the processes the kit runs with the same code in both runs, the load generator
 * and its own test backend, beside a figure (`<side>.generator.cpuPerRequestUs`, `backendCpuPerRequestUs`,
 * `cpuPerRequestUs.backend`): what they moved by is what the machine alone moved CPU per request by
 * between the two runs (other work on it, a cold first run). Measured here: two runs of one build whose
 * backend and generator moved 29 % and 28 %, the tunnel's CPU per request with them.
 */
const CONTROLS = [
  '.generator.cpuPerRequestUs',
  '.backend.cpuPerRequestUs',
  '.backendCpuPerRequestUs',
  '.cpuPerRequestUs.backend',
];

/** The largest change, in %, of the control figures nearest to `key` (same side, same stage). */
export function machineCpuChangePct(
  key: string,
  before: ReadonlyMap<string, Figure>,
  after: ReadonlyMap<string, Figure>,
): number | null {
  let prefix = key;
  while (prefix.includes('.')) {
    prefix = prefix.slice(0, prefix.lastIndexOf('.'));
    const changes = CONTROLS.flatMap((control) => {
      const b = before.get(prefix + control)?.value;
      const h = after.get(prefix + control)?.value;
      return b === undefined || h === undefined || b === 0 ? [] : [Math.abs(((h - b) / b) * 100)];
    });
    if (changes.length > 0) return Math.max(...changes);
  }
  return null;
}

export function compareReports(base: LoadedReport, head: LoadedReport, maxRegressPct: number): Comparison {
  const before = reportFigures(base.json);
  const after = reportFigures(head.json);
  const figures: ComparedFigure[] = [];
  for (const [key, b] of before) {
    const h = after.get(key);
    if (h === undefined) continue;
    const machine = b.kind === 'cpu' ? machineCpuChangePct(key, before, after) : null;
    figures.push(compareFigure(b, h, maxRegressPct, machine ?? 0));
  }
  const shared = figures.length;
  const regressions = figures.filter((f) => f.mark === 'regression');
  return {
    scenario: base.scenario,
    base: ref(base),
    head: ref(head),
    maxRegressPct,
    minNoisePct: MIN_NOISE_PCT,
    figures,
    regressions,
    onlyInBase: before.size - shared,
    onlyInHead: after.size - shared,
    differences: runDifferences(base.json, head.json),
    passed: regressions.length === 0,
  };
}

export function compareFigure(
  base: Figure,
  head: Figure,
  maxRegressPct: number,
  machinePct = 0,
): ComparedFigure {
  const changePct =
    base.value === 0
      ? head.value === 0
        ? 0
        : null
      : ((head.value - base.value) / Math.abs(base.value)) * 100;
  const noisePct = Math.max(MIN_NOISE_PCT, (base.noise ?? 0) * 100, (head.noise ?? 0) * 100, machinePct);
  const beyondNoise = changePct !== null && Math.abs(changePct) > noisePct;
  const lowSample = base.lowSample || head.lowSample;
  const higher = higherIsBetter(base.kind);
  let mark: Mark = '';
  if (beyondNoise && changePct !== null) {
    if (higher === null) mark = 'changed';
    else {
      const worse = higher ? changePct < 0 : changePct > 0;
      if (!worse) mark = 'better';
      else mark = !lowSample && Math.abs(changePct) > maxRegressPct ? 'regression' : 'worse';
    }
  }
  return {
    key: base.key,
    kind: base.kind,
    base: base.value,
    head: head.value,
    changePct,
    noisePct,
    beyondNoise,
    lowSample,
    mark,
  };
}
