import { stageLabel } from '../measure/report-format.js';
import type { BenchReport, SideHold, SideReport, Verdict } from '../plan/report-schema.js';
import type { Table } from './report-tables.js';

/** The verdict as report.md and report.html show it, first in each: the answer before the figures. */
export interface VerdictSection {
  summary: string;
  /** The tunnel's cost at its knee; null unless both sides ran. */
  cost: string | null;
  table: Table;
  /** Each stage's cost sentence, to paste. */
  stageCosts: string[];
  warnings: string[];
  rules: string;
}

const holdCell = (hold: SideHold | null): string =>
  hold === null ? '–' : hold.held ? 'held' : `bent (${hold.bend})`;

/** The machine during a stage: 1-minute load average before the first side and after the last, busy CPU of each side. */
function machineCell(sides: (SideReport | null)[]): string {
  const ran = sides.filter((s): s is SideReport => s?.machine !== undefined);
  if (ran.length === 0) return '–';
  const first = ran[0]!.machine!;
  const last = ran[ran.length - 1]!.machine!;
  const busy = ran.map((s) =>
    s.machine!.busyCpuPct === null ? '–' : `${s.machine!.busyCpuPct.toFixed(0)} %`,
  );
  return `${first.loadAverageBefore.toFixed(2)} → ${last.loadAverageAfter.toFixed(2)} · busy ${busy.join(' / ')}`;
}

function rulesText(verdict: Verdict): string {
  const r = verdict.rules;
  return (
    `A side held a stage when it achieved ≥ ${r.heldRatePct} % of the target (requests in flight at the stop ` +
    `counted, one per connection), success ≥ ${r.minSuccessPct} % and its p99 (corrected at a fixed rate) ` +
    `≤ ${r.p99Factor} × its first stage's or ${r.p99FloorMs} ms, whichever is larger. A process is saturated ` +
    `when its busiest thread was on a core or waiting for one ${r.nearCorePct} % of the time (or its CPU reached that). The first stage ` +
    'a side did not hold names what saturated: the generator when it was saturated and every side bent, ' +
    'the backend when the direct side bent, the tunnel (the edge or the agent, whichever wanted more CPU) ' +
    'when only the tunnel bent; none of them (unknown) for a bend in latency alone with no process near a ' +
    `core on a busy machine. A busy machine: over ${r.busyOtherCpuPct} % of a core used outside the run's ` +
    'processes during a side. Machine column: 1-minute load average before → after the stage, the whole ' +
    "machine's busy CPU during each side (% of one core)."
  );
}

/** The verdict's parts for a report; null for a report written before the kit had one. */
export function verdictSection(report: BenchReport): VerdictSection | null {
  const verdict = report.verdict;
  if (verdict === undefined) return null;
  const table: Table = {
    header: ['#', 'load', 'direct', 'tunnel', 'saturated', 'reading', 'machine (load avg · busy CPU)'],
    rows: verdict.stages.map((sv) => {
      const stage = report.stages.find((s) => s.index === sv.index)!;
      const what =
        sv.process !== null && sv.process !== sv.saturated ? `${sv.saturated} (${sv.process})` : sv.saturated;
      return [
        `${sv.index}`,
        stageLabel(stage),
        holdCell(sv.direct),
        holdCell(sv.tunnel),
        what,
        sv.reason,
        machineCell([stage.direct, stage.tunnel]),
      ];
    }),
  };
  return {
    summary: verdict.summary,
    cost: verdict.cost,
    table,
    stageCosts: verdict.stages.flatMap((sv) => (sv.cost === null ? [] : [sv.cost])),
    warnings: verdict.warnings.map((w) => w.text),
    rules: rulesText(verdict),
  };
}
