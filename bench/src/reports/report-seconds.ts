import { count, marked, ms, rps, stageLabel } from '../measure/report-format.js';
import type { BenchReport, SecondPoint, SideName, SideReport, StageReport } from '../plan/report-schema.js';
import {
  LOW_SAMPLE_MARK,
  LOW_SAMPLE_NOTE,
  type PercentileKey,
  samplesNeeded,
} from '../plan/sample-sufficiency.js';
import type { Table } from './report-tables.js';

/**
 * The second-by-second record of each stage, summarised for report.md and report.html: a stage's p99 is
 * taken over all its requests, so a stall of a second or two barely moves it; the worst second's p99 and
 * the lowest second's rate show it.
 */

/** Why most seconds' p99 is marked at low rates. */
export const SECOND_P99_NOTE =
  `${LOW_SAMPLE_MARK} on a second's p99: that second had fewer than ${samplesNeeded('p99').toLocaleString('en-US')} ` +
  "answers, so its p99 is its slowest few answers (below 1,000 RPS, every second's is): read it as a bound; " +
  'a stall still shows as a jump against the median second.';

/** Whole seconds only, unless the stage had nothing else: a partial last second's rate is noise. */
function fullSeconds(points: readonly SecondPoint[]): readonly SecondPoint[] {
  const whole = points.filter((p) => p.durationSec >= 1);
  return whole.length > 0 ? whole : points;
}

export interface SecondsSummary {
  seconds: number;
  worstP99: SecondPoint | null;
  medianP99Ms: number | null;
  lowestRate: SecondPoint | null;
  errorSeconds: number;
}

export function summarizeSeconds(points: readonly SecondPoint[]): SecondsSummary {
  const timed = points.filter((p) => p.p99Ms !== null);
  const worstP99 = timed.reduce<SecondPoint | null>(
    (w, p) => (w === null || p.p99Ms! > w.p99Ms! ? p : w),
    null,
  );
  const sorted = timed.map((p) => p.p99Ms!).sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const medianP99Ms =
    sorted.length === 0
      ? null
      : sorted.length % 2 === 1
        ? sorted[mid]!
        : (sorted[mid - 1]! + sorted[mid]!) / 2;
  const lowestRate = fullSeconds(points).reduce<SecondPoint | null>(
    (w, p) => (w === null || p.achievedRps < w.achievedRps ? p : w),
    null,
  );
  return {
    // The stage's measured length: whole seconds and its partial last one.
    seconds: points.reduce((sum, p) => sum + p.durationSec, 0),
    worstP99,
    medianP99Ms,
    lowestRate,
    errorSeconds: points.filter((p) => p.errors > 0).length,
  };
}

/** The sides of a stage that carry a per-second record (reports before it have none). */
export function sidesWithSeconds(
  report: BenchReport,
  stage: StageReport,
): { side: SideName; report: SideReport & { perSecond: SecondPoint[] } }[] {
  return report.settings.sides.flatMap((side) => {
    const s = stage[side];
    return s?.perSecond === undefined ? [] : [{ side, report: { ...s, perSecond: s.perSecond } }];
  });
}

/** One row per stage and side: the warm-up, the worst second's p99 and the lowest second's rate. */
export function secondsTable(report: BenchReport): Table {
  const rows: string[][] = [];
  for (const stage of report.stages) {
    for (const { side, report: s } of sidesWithSeconds(report, stage)) {
      const summary = summarizeSeconds(s.perSecond);
      const worst = summary.worstP99;
      const lowest = summary.lowestRate;
      rows.push([
        `${stage.index}`,
        stageLabel(stage),
        side,
        stage.warmupSec === undefined ? '–' : `${stage.warmupSec}`,
        summary.seconds.toFixed(1),
        summary.medianP99Ms === null ? '–' : ms(summary.medianP99Ms),
        worst === null ? '–' : marked(ms(worst.p99Ms!), 'p99', worst.lowSamplePercentiles),
        worst === null ? '–' : `${worst.second}`,
        lowest === null ? '–' : rps(lowest.achievedRps),
        lowest === null ? '–' : `${lowest.second}`,
        `${count(summary.errorSeconds)}`,
      ]);
    }
  }
  return {
    header: [
      '#',
      'load',
      'side',
      'warm-up (s)',
      'seconds',
      'median second p99 (ms)',
      'worst second p99 (ms)',
      'at (s)',
      'lowest second rate (req/s)',
      'at (s)',
      'seconds with errors',
    ],
    rows,
  };
}

/** Whether any percentile in the per-second record is flagged (the footnote is printed then). */
export function anySecondFlagged(report: BenchReport): boolean {
  return report.stages.some((stage) =>
    sidesWithSeconds(report, stage).some(({ report: s }) =>
      s.perSecond.some((p) => p.lowSamplePercentiles.length > 0),
    ),
  );
}

/** A stage's worst second's p99 (ms) and lowest whole second's rate (req/s), for one-line stage tables. */
export function worstSecondCells(points: readonly SecondPoint[] | undefined): [string, string] {
  if (points === undefined) return ['–', '–'];
  const { worstP99, lowestRate } = summarizeSeconds(points);
  return [
    worstP99 === null ? '–' : marked(ms(worstP99.p99Ms!), 'p99', worstP99.lowSamplePercentiles),
    lowestRate === null ? '–' : rps(lowestRate.achievedRps),
  ];
}

/** The footnotes for a stage table whose figures carry the too-few-samples mark; '' when none does. */
export function lowSampleFootnote(
  stages: readonly { lowSamplePercentiles?: readonly PercentileKey[]; perSecond?: readonly SecondPoint[] }[],
): string {
  const stage = stages.some((s) => (s.lowSamplePercentiles?.length ?? 0) > 0);
  const second = stages.some((s) => s.perSecond?.some((p) => p.lowSamplePercentiles.length > 0) === true);
  return (stage ? `${LOW_SAMPLE_NOTE}\n\n` : '') + (second ? `${SECOND_P99_NOTE}\n\n` : '');
}
