import { requestLine, sidesLine } from '../measure/report-format.js';
import type { BenchReport } from '../plan/report-schema.js';
import { LOW_SAMPLE_NOTE } from '../plan/sample-sufficiency.js';
import { SCENARIOS } from '../plan/scenarios.js';
import { anySecondFlagged, SECOND_P99_NOTE, secondsTable } from './report-seconds.js';
import {
  anyLowSample,
  costTable,
  howToRead,
  inspectorTable,
  processTable,
  shortfalls,
  stageTable,
  type Table,
  totalsTable,
} from './report-tables.js';
import { verdictSection } from './verdict-section.js';

function markdownTable(table: Table): string {
  // A pipe inside a cell would end it.
  const line = (cells: string[]): string => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(table.header), line(table.header.map(() => '---')), ...table.rows.map(line)].join('\n');
}

/** The warm-up rule, or for reports before it, the single warm-up they had. */
export function warmupText(settings: BenchReport['settings']): string {
  return settings.warmupRule ?? `${settings.warmupSec} s before the first stage, per side`;
}

/** report.md: tables only, so it reads the same in a terminal, a PR comment and a GitHub job summary. */
export function renderMarkdown(report: BenchReport): string {
  const scenario = SCENARIOS[report.scenario];
  const env = report.environment;
  const out: string[] = [
    `# tunnel2 bench: ${scenario.title}`,
    '',
    `${scenario.purpose}.`,
    '',
    `\`${report.command}\``,
    '',
    `${report.startedAt} · tunnel2 ${env.tunnel2} · Node ${env.node} · ${env.cpus} × ${env.cpuModel} · ` +
      `${env.platform}/${env.arch} · autocannon ${env.autocannon} · ${requestLine(report.settings)} · ` +
      `warm-up: ${warmupText(report.settings)}`,
    '',
    sidesLine(report.settings),
    '',
  ];
  if (report.aborted !== null) out.push(`> **The run stopped early:** ${report.aborted}`, '');
  const gate = report.gate;
  if (gate.failUnderPct !== null || gate.maxP99Ms !== null || !gate.passed) {
    out.push(gate.passed ? '**Gate: passed**' : '**Gate: FAILED**', '');
    if (gate.violations.length > 0) out.push(...gate.violations.map((v) => `- ${v}`), '');
  }
  const verdict = verdictSection(report);
  if (verdict !== null) {
    out.push('## Verdict', '', `**${verdict.summary}**`, '');
    if (verdict.cost !== null) out.push(`Tunnel cost: ${verdict.cost}`, '');
    out.push(markdownTable(verdict.table), '');
    if (verdict.stageCosts.length > 1) out.push(...verdict.stageCosts.map((c) => `- ${c}`), '');
    if (verdict.warnings.length > 0) out.push(...verdict.warnings.map((w) => `- ⚠ ${w}`), '');
    out.push(verdict.rules, '');
  }
  out.push('## Totals', '', markdownTable(totalsTable(report)), '');
  out.push('## Per stage', '', markdownTable(stageTable(report)), '');
  if (anyLowSample(report)) out.push(LOW_SAMPLE_NOTE, '');
  const short = shortfalls(report);
  if (short.length > 0) {
    out.push('⚠ = a fixed-rate stage that achieved less than 95 % of its target.', '');
    out.push(...short.map((s) => `- ⚠ ${s}`), '');
  }
  const seconds = secondsTable(report);
  if (seconds.rows.length > 0) {
    out.push(
      '## Second by second',
      '',
      "Each stage's seconds after its warm-up: the median and the worst second's p99 (of the answers completed " +
        'in that second) and the lowest rate of a whole second, with when they happened (seconds into the stage). ' +
        'A stall shows here; report.json has every second, report.html draws them.',
      '',
      markdownTable(seconds),
      '',
    );
    if (anySecondFlagged(report)) out.push(SECOND_P99_NOTE, '');
  }
  const cost = costTable(report);
  if (cost.rows.length > 0) out.push('## Tunnel cost (tunnel − direct)', '', markdownTable(cost), '');
  const inspector = inspectorTable(report);
  if (inspector.rows.length > 0) {
    out.push("## The agent's request inspector (off → on)", '', markdownTable(inspector), '');
  }
  out.push('## Processes', '', markdownTable(processTable(report)), '');
  out.push(howToRead(report.settings), '');
  return out.join('\n');
}
