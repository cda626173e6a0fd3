import { runDifferences } from './differences.js';
import { type FigureKind, higherIsBetter } from './figure-kind.js';
import { type Figure, reportFigures, TYPICAL_SECOND_P99 } from './figures.js';
import {
  isFloor,
  loadWarning,
  machineCpuChangePct,
  machineFloorChangePct,
  machineLatencyChangePct,
  ranAgainstTarget,
} from './machine-rules.js';
import type { LoadedReport } from './report-input.js';

/**
 * Two reports of one scenario, figure by figure. A change counts as beyond the noise when it is larger
 * than the noise band: the larger of MIN_NOISE_PCT and the noise either report shows for that figure
 * (figures.ts: its repetitions' spread, or its stage's seconds), and for CPU per request what the kit's
 * own processes beside it moved by, for a p99 how much the load generator's loop delay rose, and for any
 * gated figure what the same figure in its floors (the direct side, the relays: machine-rules.ts) moved
 * by. The machine's move the figure's way is taken off the change (as factors) before `maxRegressPct`. A regression is a gated figure (p99,
 * throughput, CPU per request, RSS: figure-kind.ts) that moved the worse way by more than `maxRegressPct`
 * and beyond the noise, that has a noise estimate in at least one report (a one-shot figure has none: it
 * is shown, not gated), and whose percentile neither report marks as read from too few samples; or a
 * success rate that fell by more than `maxErrorRisePts` percentage points.
 */

/** The band below which no change is called real, however steady both runs look. */
export const MIN_NOISE_PCT = 5;
/** `--max-regress` when not given: the default threshold. */
export const DEFAULT_MAX_REGRESS_PCT = 20;
/**
 * `--max-error-rise` when not given, in percentage points of the success rate: one failed request in a
 * hundred more than base fails the comparison, as k6's usual `http_req_failed: rate<0.01` would.
 */
export const DEFAULT_MAX_ERROR_RISE_PTS = 1;

/**
 * Figures of one timed event rather than of a load held for seconds: a transfer of `bulk` or `tcp`
 * (`transfers[download tunnel].mbPerSec`). Without repetitions nothing shows how far the next run's would
 * land (reversed `tcp --size 16` runs here: the direct side's own −62 % and −87 %), so they are not gated.
 */
const ONE_SHOT = /(^|\.)transfers\[/;

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
  /** Neither report shows how steady this figure is (a one-shot measurement): shown, never gated. */
  noNoiseEstimate: boolean;
  /**
   * A figure of a floor (the direct side against the kit's own backend, a relay): the kit's code, the same
   * in both runs, so what it moved by is the machine's: shown, never gated.
   */
  floor: boolean;
  /**
   * A stage's own p99 (or a percentile above it) beside the typical second's (`typicalSecondP99Ms`): one
   * stalled second sets it, so that one is gated in its stead; this is shown, never gated.
   */
  gatedBySeconds: boolean;
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
  maxErrorRisePts: number;
  minNoisePct: number;
  /** Every figure both reports have, in the base report's order. */
  figures: ComparedFigure[];
  regressions: ComparedFigure[];
  /** Figures only one of the two has (a side or stage the other did not run, a field it did not know). */
  onlyInBase: number;
  onlyInHead: number;
  /** What differs between the runs besides the code: the machine, the settings (differences.ts). */
  differences: string[];
  /** What may have moved the figures besides the code (one run's machine busier: machine-rules.ts). */
  warnings: string[];
  passed: boolean;
}

const ref = (r: LoadedReport): ReportRef => ({ file: r.file, command: r.command, startedAt: r.startedAt });

/** Whether a node holding `key` (its side, its stage) has the typical second's p99 in both reports. */
function hasTypicalSecond(
  key: string,
  before: ReadonlyMap<string, Figure>,
  after: ReadonlyMap<string, Figure>,
) {
  let prefix = key;
  while (prefix.includes('.')) {
    prefix = prefix.slice(0, prefix.lastIndexOf('.'));
    const typical = `${prefix}.${TYPICAL_SECOND_P99}`;
    if (before.has(typical) && after.has(typical)) return true;
  }
  return false;
}

export function compareReports(
  base: LoadedReport,
  head: LoadedReport,
  maxRegressPct: number,
  maxErrorRisePts = DEFAULT_MAX_ERROR_RISE_PTS,
): Comparison {
  const before = reportFigures(base.json);
  const after = reportFigures(head.json);
  // Against the user's service (--target) the direct side runs code that may be what changed.
  const floorsAreTheKits = !ranAgainstTarget(base.json) && !ranAgainstTarget(head.json);
  const figures: ComparedFigure[] = [];
  for (const [key, b] of before) {
    const h = after.get(key);
    if (h === undefined) continue;
    const gated = higherIsBetter(b.kind) !== null && b.kind !== 'success';
    const cpu = b.kind === 'cpu' ? machineCpuChangePct(key, before, after) : null;
    const held = b.kind === 'p99' && h.value > b.value ? machineLatencyChangePct(key, before, after) : null;
    const change = b.value === 0 ? 0 : (h.value - b.value) / Math.abs(b.value);
    const floor =
      gated && floorsAreTheKits && change !== 0 ? machineFloorChangePct(key, change, before, after) : null;
    const compared = compareFigure(
      b,
      h,
      maxRegressPct,
      Math.max(cpu ?? 0, held ?? 0, floor?.sameWay ?? 0),
      maxErrorRisePts,
      floor?.any ?? 0,
    );
    if (floorsAreTheKits && b.kind !== 'success' && isFloor(key)) compared.floor = true;
    if (b.kind === 'p99' && !key.endsWith(`.${TYPICAL_SECOND_P99}`) && hasTypicalSecond(key, before, after)) {
      compared.gatedBySeconds = true;
    }
    if ((compared.floor || compared.gatedBySeconds) && compared.mark === 'regression')
      compared.mark = 'worse';
    figures.push(compared);
  }
  const warning = loadWarning(base.json, head.json);
  const shared = figures.length;
  const regressions = figures.filter((f) => f.mark === 'regression');
  return {
    scenario: base.scenario,
    base: ref(base),
    head: ref(head),
    maxRegressPct,
    maxErrorRisePts,
    minNoisePct: MIN_NOISE_PCT,
    figures,
    regressions,
    onlyInBase: before.size - shared,
    onlyInHead: after.size - shared,
    differences: runDifferences(base.json, head.json),
    warnings: warning === null ? [] : [warning],
    passed: regressions.length === 0,
  };
}

export function compareFigure(
  base: Figure,
  head: Figure,
  maxRegressPct: number,
  machinePct = 0,
  maxErrorRisePts = DEFAULT_MAX_ERROR_RISE_PTS,
  /** How far the machine's state moved either way (its floors'): widens the band only. */
  machineSpreadPct = 0,
): ComparedFigure {
  const changePct =
    base.value === 0
      ? head.value === 0
        ? 0
        : null
      : ((head.value - base.value) / Math.abs(base.value)) * 100;
  const lowSample = base.lowSample || head.lowSample;
  const compared = {
    key: base.key,
    kind: base.kind,
    base: base.value,
    head: head.value,
    changePct,
    lowSample,
  };
  if (base.kind === 'success') return compareSuccess(compared, maxErrorRisePts);
  const noNoiseEstimate = ONE_SHOT.test(base.key) && base.noise === null && head.noise === null;
  const noisePct = Math.max(
    MIN_NOISE_PCT,
    (base.noise ?? 0) * 100,
    (head.noise ?? 0) * 100,
    machinePct,
    machineSpreadPct,
  );
  const beyondNoise = changePct !== null && Math.abs(changePct) > noisePct;
  const higher = higherIsBetter(base.kind);
  let mark: Mark = '';
  if (beyondNoise && changePct !== null) {
    if (higher === null) mark = 'changed';
    else {
      const worse = higher ? changePct < 0 : changePct > 0;
      const gated = !lowSample && !noNoiseEstimate;
      if (!worse) mark = 'better';
      // What the machine moved it by is not the change's: only the rest counts against --max-regress.
      else mark = gated && netOfMachinePct(changePct, machinePct) > maxRegressPct ? 'regression' : 'worse';
    }
  }
  return { ...compared, noisePct, beyondNoise, noNoiseEstimate, floor: false, gatedBySeconds: false, mark };
}

/**
 * How much worse a figure moved than the machine moved it, in %: the two compose as factors (a machine
 * that slowed every request 3× and a change that slowed it 10 % more read 3.3×), so the figure's factor
 * over the machine's. `changePct` is the figure's change the worse way, `machinePct` the machine's move
 * the same way (0: none).
 */
export function netOfMachinePct(changePct: number, machinePct: number): number {
  const change = Math.abs(changePct) / 100;
  const machine = machinePct / 100;
  if (changePct > 0) return ((1 + change) / (1 + machine) - 1) * 100;
  // Down (throughput): what is left of the figure over what the machine left of its floor.
  return machine >= 1 ? 0 : (1 - (1 - change) / (1 - machine)) * 100;
}

/**
 * A success rate is counted, not sampled: any change is one, and a fall of more than `maxErrorRisePts`
 * percentage points (errors up) is a regression however the other figures moved. Its noise column
 * shows that threshold.
 */
function compareSuccess(
  f: Pick<ComparedFigure, 'key' | 'kind' | 'base' | 'head' | 'changePct' | 'lowSample'>,
  maxErrorRisePts: number,
): ComparedFigure {
  const fall = f.base - f.head;
  const mark: Mark = fall > maxErrorRisePts ? 'regression' : fall > 0 ? 'worse' : fall < 0 ? 'better' : '';
  return {
    ...f,
    noisePct: maxErrorRisePts,
    beyondNoise: fall !== 0,
    noNoiseEstimate: false,
    floor: false,
    gatedBySeconds: false,
    mark,
  };
}
