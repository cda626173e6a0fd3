import { requestLine, sidesLine, stageLabel } from '../measure/report-format.js';
import type { BenchReport, SideReport, StageReport } from '../plan/report-schema.js';
import { LOW_SAMPLE_MARK, LOW_SAMPLE_NOTE, type PercentileKey } from '../plan/sample-sufficiency.js';
import { SCENARIOS } from '../plan/scenarios.js';
import { warmupText } from './report-md.js';
import { anySecondFlagged, SECOND_P99_NOTE, secondsTable, sidesWithSeconds } from './report-seconds.js';
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
import { barChart, escapeXml, lineChart, type Series } from './svg-charts.js';
import { verdictSection } from './verdict-section.js';

const COLORS = {
  direct: '#2b6cb0',
  directLight: '#90cdf4',
  tunnel: '#c05621',
  tunnelLight: '#fbd38d',
  target: '#4a5568',
  edge: '#805ad5',
  agent: '#d53f8c',
  backend: '#38a169',
};

export function htmlTable(table: Table): string {
  const head = table.header.map((h) => `<th>${escapeXml(h)}</th>`).join('');
  const body = table.rows
    .map((row) => `<tr>${row.map((cell) => `<td>${escapeXml(cell)}</td>`).join('')}</tr>`)
    .join('\n');
  // Wide tables scroll on their own instead of widening the page.
  return `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table></div>`;
}

type Pick = (s: SideReport) => number | null;

function series(
  report: BenchReport,
  side: 'direct' | 'tunnel',
  name: string,
  color: string,
  pick: Pick,
  dashed = false,
): Series | null {
  if (!report.settings.sides.includes(side)) return null;
  return {
    name,
    color,
    dashed,
    values: report.stages.map((st) => (st[side] === null ? null : pick(st[side]))),
  };
}

const present = (list: (Series | null)[]): Series[] => list.filter((s): s is Series => s !== null);

function latencyChart(report: BenchReport, labels: string[]): string {
  return lineChart({
    title: 'Latency percentiles per stage (log scale)',
    xLabels: labels,
    yLabel: 'ms',
    log: true,
    series: present([
      series(report, 'direct', 'direct p50', COLORS.directLight, (s) => s.latencyMs.p50),
      series(report, 'direct', 'direct p99', COLORS.direct, (s) => s.latencyMs.p99),
      series(report, 'direct', 'direct p99 corr.', COLORS.direct, (s) => s.correctedP99Ms, true),
      series(report, 'tunnel', 'tunnel p50', COLORS.tunnelLight, (s) => s.latencyMs.p50),
      series(report, 'tunnel', 'tunnel p99', COLORS.tunnel, (s) => s.latencyMs.p99),
      series(report, 'tunnel', 'tunnel p99 corr.', COLORS.tunnel, (s) => s.correctedP99Ms, true),
    ]),
  });
}

function throughputChart(report: BenchReport, labels: string[]): string {
  const hasTarget = report.stages.some((s) => s.targetRps !== null);
  return barChart({
    title: hasTarget ? 'Achieved vs target RPS' : 'Achieved RPS (closed loop)',
    xLabels: labels,
    yLabel: 'requests/s',
    series: present([
      hasTarget
        ? {
            name: 'target',
            color: COLORS.target,
            dashed: true,
            values: report.stages.map((s) => s.targetRps),
          }
        : null,
      series(report, 'direct', 'direct achieved', COLORS.direct, (s) => s.achievedRps),
      series(report, 'tunnel', 'tunnel achieved', COLORS.tunnel, (s) => s.achievedRps),
    ]),
  });
}

const PERCENTILES: {
  label: string;
  key: PercentileKey | null;
  pick: (l: SideReport['latencyMs']) => number;
}[] = [
  { label: 'p50', key: 'p50', pick: (l) => l.p50 },
  { label: 'p75', key: 'p75', pick: (l) => l.p75 },
  { label: 'p90', key: 'p90', pick: (l) => l.p90 },
  { label: 'p95', key: 'p95', pick: (l) => l.p95 },
  { label: 'p99', key: 'p99', pick: (l) => l.p99 },
  { label: 'p99.9', key: 'p999', pick: (l) => l.p999 },
  { label: 'max', key: null, pick: (l) => l.max },
];

/** The percentile spectrum of one stage, tunnel against direct: where in the distribution the cost sits. */
function spectrumChart(stage: StageReport): string {
  const line = (s: SideReport | null, name: string, color: string, corrected: boolean): Series | null =>
    s === null
      ? null
      : {
          name,
          color,
          dashed: corrected,
          values: PERCENTILES.map((p) => p.pick(corrected ? s.correctedLatencyMs : s.latencyMs)),
        };
  return lineChart({
    title: `Stage ${stage.index} · ${stageLabel(stage)}: latency by percentile`,
    // A percentile either side read from too few samples carries the mark on its axis label.
    xLabels: PERCENTILES.map((p) =>
      p.key !== null &&
      [stage.direct, stage.tunnel].some((s) => s?.lowSamplePercentiles?.includes(p.key!) === true)
        ? `${p.label} ${LOW_SAMPLE_MARK}`
        : p.label,
    ),
    yLabel: 'ms',
    log: true,
    width: 480,
    height: 300,
    series: present([
      line(stage.direct, 'direct', COLORS.direct, false),
      line(stage.tunnel, 'tunnel', COLORS.tunnel, false),
      line(stage.tunnel, 'tunnel corr.', COLORS.tunnel, true),
    ]),
  });
}

/** A chart per stage: the p50 and p99 of each second, or the rate of each second, both sides overlaid. */
function secondsChart(report: BenchReport, stage: StageReport, what: 'latency' | 'rate'): string {
  const sides = sidesWithSeconds(report, stage);
  const length = Math.max(0, ...sides.map(({ report: s }) => s.perSecond.length));
  const labels = Array.from({ length }, (_, i) => `${i}`);
  const warmup = stage.warmupSec ? ` (after ${stage.warmupSec} s warm-up)` : '';
  const head = `Stage ${stage.index} · ${stageLabel(stage)}${warmup}`;
  const color = (side: 'direct' | 'tunnel', light: boolean): string =>
    side === 'direct'
      ? light
        ? COLORS.directLight
        : COLORS.direct
      : light
        ? COLORS.tunnelLight
        : COLORS.tunnel;
  const at = (points: readonly (number | null)[]): (number | null)[] =>
    labels.map((_, i) => points[i] ?? null);
  const common = { xLabels: labels, width: 720, height: 300, markers: length <= 40 };
  if (what === 'latency') {
    return lineChart({
      ...common,
      title: `${head}: latency per second (s into the stage; log scale)`,
      yLabel: 'ms',
      log: true,
      series: sides.flatMap(({ side, report: s }) => {
        const flagged = s.perSecond.some((p) => p.lowSamplePercentiles.includes('p99'));
        return [
          { name: `${side} p50`, color: color(side, true), values: at(s.perSecond.map((p) => p.p50Ms)) },
          {
            name: `${side} p99${flagged ? ` ${LOW_SAMPLE_MARK}` : ''}`,
            color: color(side, false),
            values: at(s.perSecond.map((p) => p.p99Ms)),
          },
        ];
      }),
    });
  }
  return lineChart({
    ...common,
    title: `${head}: achieved rate per second (s into the stage)`,
    yLabel: 'req/s',
    series: present([
      stage.targetRps === null
        ? null
        : { name: 'target', color: COLORS.target, dashed: true, values: labels.map(() => stage.targetRps) },
      ...sides.map(({ side, report: s }) => ({
        name: `${side}`,
        color: color(side, false),
        values: at(s.perSecond.map((p) => (p.durationSec >= 1 ? p.achievedRps : null))),
      })),
      ...sides.map(({ side, report: s }) => ({
        name: `${side} errors`,
        color: side === 'direct' ? '#2c5282' : '#c53030',
        dashed: true,
        values: at(s.perSecond.map((p) => (p.errors > 0 ? p.errors / p.durationSec : null))),
      })),
    ]),
  });
}

function cpuChart(report: BenchReport, labels: string[]): string {
  return barChart({
    title: 'CPU per process during each stage (% of one core)',
    xLabels: labels,
    yLabel: '% CPU',
    series: present([
      series(report, 'direct', 'backend (direct)', COLORS.directLight, (s) => s.backend?.cpuPct ?? null),
      series(report, 'tunnel', 'backend (tunnel)', COLORS.backend, (s) => s.backend?.cpuPct ?? null),
      series(report, 'tunnel', 'edge', COLORS.edge, (s) => s.edge?.cpuPct ?? null),
      series(report, 'tunnel', 'agent', COLORS.agent, (s) => s.agent?.cpuPct ?? null),
    ]),
  });
}

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1920px; padding: 0 24px; color: #1a202c; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #e2e8f0; }
code { background: #edf2f7; padding: 1px 4px; border-radius: 3px; }
.meta { color: #4a5568; } .gate-ok { color: #276749; font-weight: 600; } .gate-fail { color: #c53030; font-weight: 600; }
.verdict { font-weight: 600; font-size: 15px; }
.verdict-table td, .verdict-table th { white-space: normal; text-align: left; } .verdict-table td:nth-child(6) { min-width: 32em; }
.warn { background: #fffaf0; border-left: 4px solid #dd6b20; padding: 6px 10px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 600px), 1fr)); gap: 16px; }
.charts.small { grid-template-columns: repeat(auto-fill, minmax(min(100%, 420px), 1fr)); } .charts.small .chart { max-width: 640px; }
.chart { display: block; width: 100%; height: auto; background: #fff; border: 1px solid #e2e8f0; border-radius: 6px; }
.chart-title { font-size: 14px; font-weight: 600; fill: #1a202c; } .tick { font-size: 11px; fill: #4a5568; }
.axis { font-size: 12px; fill: #4a5568; } .legend { font-size: 12px; fill: #1a202c; }
.grid { stroke: #edf2f7; } .axis-line { stroke: #a0aec0; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; } th, td { border: 1px solid #e2e8f0; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f7fafc; } td:nth-child(-n+3) { text-align: left; }
.scroll { overflow-x: auto; }
`;

/** report.html: one self-contained file, inline SVG charts and the report's tables; no script, no network. */
export function renderHtml(report: BenchReport): string {
  const scenario = SCENARIOS[report.scenario];
  const env = report.environment;
  // A stage whose p99 (either side) came from too few answers carries the mark on the per-stage charts' axis.
  const labels = report.stages.map(stageLabel);
  const latencyLabels = report.stages.map((stage) =>
    report.settings.sides.some((side) => stage[side]?.lowSamplePercentiles?.includes('p99') === true)
      ? `${stageLabel(stage)} ${LOW_SAMPLE_MARK}`
      : stageLabel(stage),
  );
  const parts: string[] = [];
  parts.push(`<h1>tunnel2 bench: ${escapeXml(scenario.title)}</h1>`);
  parts.push(`<p class="meta">${escapeXml(scenario.purpose)}.</p>`);
  parts.push(`<p><code>${escapeXml(report.command)}</code></p>`);
  parts.push(
    `<p class="meta">${escapeXml(
      `${report.startedAt} · tunnel2 ${env.tunnel2} · Node ${env.node} · ${env.cpus} × ${env.cpuModel} · ` +
        `${env.platform}/${env.arch} · autocannon ${env.autocannon} · ${requestLine(report.settings)} · ` +
        `warm-up: ${warmupText(report.settings)}`,
    )}</p>`,
  );
  parts.push(`<p class="meta">${escapeXml(sidesLine(report.settings))}</p>`);
  if (report.aborted !== null) {
    parts.push(`<p class="warn"><b>The run stopped early:</b> ${escapeXml(report.aborted)}</p>`);
  }
  const gate = report.gate;
  if (gate.failUnderPct !== null || gate.maxP99Ms !== null || !gate.passed) {
    parts.push(
      `<p class="${gate.passed ? 'gate-ok' : 'gate-fail'}">Gate: ${gate.passed ? 'passed' : 'FAILED'}</p>` +
        (gate.violations.length > 0
          ? `<ul>${gate.violations.map((v) => `<li>${escapeXml(v)}</li>`).join('')}</ul>`
          : ''),
    );
  }
  const verdict = verdictSection(report);
  if (verdict !== null) {
    parts.push('<h2>Verdict</h2>', `<p class="verdict">${escapeXml(verdict.summary)}</p>`);
    if (verdict.cost !== null) parts.push(`<p>Tunnel cost: ${escapeXml(verdict.cost)}</p>`);
    parts.push(`<div class="verdict-table">${htmlTable(verdict.table)}</div>`);
    if (verdict.stageCosts.length > 1) {
      parts.push(`<ul>${verdict.stageCosts.map((c) => `<li>${escapeXml(c)}</li>`).join('')}</ul>`);
    }
    if (verdict.warnings.length > 0) {
      parts.push(`<ul>${verdict.warnings.map((w) => `<li class="warn">${escapeXml(w)}</li>`).join('')}</ul>`);
    }
    parts.push(`<p class="meta">${escapeXml(verdict.rules)}</p>`);
  }
  parts.push('<h2>Charts</h2><div class="charts">');
  parts.push(latencyChart(report, latencyLabels), throughputChart(report, labels));
  parts.push('</div>');
  if (report.stages.some((stage) => sidesWithSeconds(report, stage).length > 0)) {
    parts.push('<h2>Second by second</h2>');
    parts.push(
      `<p class="meta">${escapeXml(
        "Each stage's seconds after its warm-up, by completion: the p50 and p99 of the answers completed in " +
          'each second (as measured, not corrected) and the rate of each whole second. A stall shows as a dip ' +
          'in the rate and a spike in p99.',
      )}</p>`,
    );
    parts.push('<div class="charts">');
    for (const stage of report.stages) {
      if (sidesWithSeconds(report, stage).length === 0) continue;
      parts.push(secondsChart(report, stage, 'latency'), secondsChart(report, stage, 'rate'));
    }
    parts.push('</div>');
    parts.push(htmlTable(secondsTable(report)));
    if (anySecondFlagged(report)) parts.push(`<p class="meta">${escapeXml(SECOND_P99_NOTE)}</p>`);
  }
  parts.push('<h2>Tunnel vs direct, by percentile</h2><div class="charts small">');
  parts.push(...report.stages.map(spectrumChart));
  parts.push('</div>');
  parts.push('<h2>Totals</h2>', htmlTable(totalsTable(report)));
  parts.push('<h2>Per stage</h2>', htmlTable(stageTable(report)));
  if (anyLowSample(report)) parts.push(`<p class="meta">${escapeXml(LOW_SAMPLE_NOTE)}</p>`);
  const short = shortfalls(report);
  if (short.length > 0) {
    parts.push('<p class="meta">⚠ = a fixed-rate stage that achieved less than 95 % of its target.</p>');
    parts.push(`<ul>${short.map((s) => `<li class="warn">${escapeXml(s)}</li>`).join('')}</ul>`);
  }
  const cost = costTable(report);
  if (cost.rows.length > 0) parts.push('<h2>Tunnel cost (tunnel − direct)</h2>', htmlTable(cost));
  const inspector = inspectorTable(report);
  if (inspector.rows.length > 0) {
    parts.push("<h2>The agent's request inspector (off → on)</h2>", htmlTable(inspector));
  }
  parts.push('<h2>Processes</h2><div class="charts">', cpuChart(report, labels), '</div>');
  parts.push(htmlTable(processTable(report)));
  parts.push(`<p class="meta">${escapeXml(howToRead(report.settings))}</p>`);
  return (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>tunnel2 bench: ${escapeXml(scenario.title)} ${escapeXml(report.startedAt)}</title>` +
    `<style>${STYLE}</style></head><body>\n${parts.join('\n')}\n</body></html>\n`
  );
}
