import type { ComparedFigure, Comparison, Mark } from './comparison.js';
import { higherIsBetter } from './figure-kind.js';

/** The comparison's tables and sentences as text, which compare-markdown.ts and compare-html.ts lay out. */

/** A table as text cells: compare.md renders it with pipes, compare.html as <table>. */
export interface Table {
  header: string[];
  rows: string[][];
}

export const MARK_TEXT: Record<Mark, string> = {
  regression: '✗ regression',
  worse: '↓ worse',
  better: '↑ better',
  changed: '≠ changed',
  '': '',
};

/** The figure as read: whole from 100 up, 1 decimal from 10, else 3 significant digits. */
export function figureText(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toLocaleString('en-US');
  if (abs >= 10) return value.toFixed(1);
  if (abs === 0) return '0';
  return Number(value.toPrecision(3)).toString();
}

export function changeText(change: number | null): string {
  if (change === null) return 'new';
  const sign = change > 0 ? '+' : change < 0 ? '−' : '±';
  return `${sign}${Math.abs(change).toFixed(1)} %`;
}

export function figureTable(figures: readonly ComparedFigure[]): Table {
  return {
    header: ['figure', 'base', 'head', 'change', 'noise', ''],
    rows: figures.map((f) => [
      f.lowSample ? `${f.key} ~` : f.key,
      figureText(f.base),
      figureText(f.head),
      changeText(f.changePct),
      noiseText(f),
      MARK_TEXT[f.mark],
    ]),
  };
}

/** The noise column: a band in %, a success rate's threshold in points, or that there is none. */
export function noiseText(f: ComparedFigure): string {
  if (f.kind === 'success') return `−${f.noisePct} pts gate`;
  if (f.noNoiseEstimate) return `±${f.noisePct.toFixed(0)} % (no noise estimate)`;
  if (f.floor) return `±${f.noisePct.toFixed(0)} % (floor)`;
  if (f.gatedBySeconds) return `±${f.noisePct.toFixed(0)} % (gated: typical second)`;
  return `±${f.noisePct.toFixed(0)} %`;
}

/** The verdict in one line, as the job summary and stderr show it. */
export function verdictLine(c: Comparison): string {
  // Reports of other stages or sides (a workflow whose --stages changed) pass, but say so: "no
  // regression" would claim a comparison that was not made.
  if (!c.figures.some((f) => higherIsBetter(f.kind) !== null && f.kind !== 'success')) {
    return 'Nothing compared: the reports share no p99, throughput, CPU per request or RSS figure (other stages or sides?), so no regression could be found.';
  }
  if (c.passed) {
    return `No regression: no p99, throughput, CPU per request or RSS figure is worse by more than ${c.maxRegressPct} % beyond the noise, no success rate fell by more than ${c.maxErrorRisePts} points.`;
  }
  const n = c.regressions.length;
  return `Regression: ${n} figure${n === 1 ? '' : 's'} worse by more than --max-regress ${c.maxRegressPct} % beyond the noise or --max-error-rise ${c.maxErrorRisePts} points: ${c.regressions
    .map((f) => `${f.key} ${changeText(f.changePct)}`)
    .join(', ')}.`;
}

export function ruleText(c: Comparison): string {
  return (
    `A change is marked when it is beyond the noise: larger than the larger of ${c.minNoisePct} % and the ` +
    'spread either run shows for that figure: the spread of its repetitions, or its stage second by second ' +
    "(the interquartile range of the seconds' rate, or p50, over their median; for a p99, how many times the " +
    "best second's p99 the worst second's is, less one; CPU and RSS take the rate's, the added p99 and " +
    "the ratios of a stage the wider of its two sides'). CPU per request also " +
    "takes what the load generator's and the kit's test backend's CPU per request beside it moved by, and " +
    "a p99 how much the load generator's own event loop delay p99 beside it rose, and " +
    'every gated figure what the same figure moved by in its floors, either way (the direct side, the ' +
    "relays; not with --target, whose direct side is the user's service): their code is the same in both " +
    "runs, so that much is the machine, and only the rest counts against --max-regress; the floors' own " +
    "figures are shown, never gated. `typicalSecondP99Ms` is the median of the seconds' p99s, its noise " +
    "their interquartile range over it: the p99 gated in place of the stage's, which one stalled second " +
    'sets (shown, never gated). A ' +
    'regression is a p99, throughput, CPU per request or RSS figure that moved the worse way beyond the ' +
    `noise by more than ${c.maxRegressPct} % (--max-regress), or a success rate that fell by more than ` +
    `${c.maxErrorRisePts} points (--max-error-rise); a percentile read from too few samples (~) and a ` +
    'figure with no noise estimate (a one-shot measurement) are shown but never gated.'
  );
}

export function sourceLines(c: Comparison): string[] {
  const line = (name: string, r: Comparison['base']): string =>
    `${name}: ${r.file}${r.startedAt === null ? '' : ` (${r.startedAt})`}${r.command === null ? '' : `: \`${r.command}\``}`;
  return [line('base', c.base), line('head', c.head)];
}

/** What may have moved the figures besides the code, one line each (a busier machine). */
export function warningLines(c: Comparison): string[] {
  return c.warnings;
}

/** The runs' differences besides the code, in one line; null when they were made alike. */
export function differencesLine(c: Comparison): string | null {
  return c.differences.length === 0 ? null : `Not alike: ${c.differences.join('; ')}.`;
}

export function countsLine(c: Comparison): string {
  const beyond = c.figures.filter((f) => f.beyondNoise).length;
  const only =
    c.onlyInBase + c.onlyInHead === 0
      ? ''
      : ` (${c.onlyInBase} only in base, ${c.onlyInHead} only in head: not compared)`;
  return `${c.figures.length} figures in both reports${only}; ${beyond} changed beyond the noise.`;
}
