import { fixed } from '../measure/report-format.js';
import {
  errorTotal,
  rowLoadText,
  type SideBySideResult,
  type SideBySideRow,
  type SideBySideTarget,
} from '../measure/side-by-side-rows.js';
import { htmlTable } from './report-html.js';
import type { Table } from './report-tables.js';
import { gateLine, heading, type StandaloneReport } from './standalone-report-md.js';
import { escapeXml } from './svg-charts.js';

/** report.md and report.html of `pnpm bench h2`, `grpc` and `tls`: the targets, then every row. */

export interface SideBySideText {
  title: string;
  /** What the scenario measures and how, one paragraph. */
  intro: string;
}

export type SideBySideReport = StandaloneReport<SideBySideResult<unknown>>;

function status(t: SideBySideTarget): string {
  if (t.met === null) return `not measured: ${t.unavailable ?? ''}`;
  return t.met ? 'met' : 'missed';
}

export function targetTable(targets: readonly SideBySideTarget[]): Table {
  return {
    header: ['target', 'limit', 'measured', 'status'],
    rows: targets.map((t) => [t.name, t.limit, t.text, status(t)]),
  };
}

function errorsText(row: SideBySideRow): string {
  const entries = Object.entries(row.errors).filter(([, n]) => n > 0);
  return entries.length === 0 ? '0' : entries.map(([kind, n]) => `${kind} ${n}`).join(', ');
}

function processCpu(row: SideBySideRow): string {
  const parts = Object.entries(row.cpuPerRequestUs).map(([name, us]) => `${name} ${fixed(us)}`);
  return parts.length === 0 ? '–' : parts.join(' · ');
}

function rssText(row: SideBySideRow): string {
  if (row.rss === null) return '–';
  return Object.entries(row.rss)
    .map(([name, r]) => `${name} ${fixed(r.firstMb)} → ${fixed(r.lastMb)} (max ${fixed(r.maxMb)})`)
    .join(' · ');
}

export function rowTable(rows: readonly SideBySideRow[]): Table {
  const streams = rows.some((r) => r.mode === 'stream');
  return {
    header: [
      'row',
      'load',
      'generator',
      'ok / finished',
      'errors',
      'skipped sends',
      'rate (req/s; streams: messages/s)',
      'p50 (ms)',
      'p99 (ms)',
      'mean (ms)',
      'max (ms)',
      ...(streams ? ['MB/s', 'RSS first → last (max), MiB'] : []),
      'between CPU (µs/req)',
      'CPU by process (µs/req)',
    ],
    rows: rows.map((r) =>
      r.unavailable !== null
        ? [
            r.label,
            rowLoadText(r),
            r.generator,
            `not measured: ${r.unavailable}`,
            ...Array<string>(streams ? 11 : 9).fill('–'),
          ]
        : [
            r.label,
            rowLoadText(r),
            r.generator,
            `${r.ok}/${r.requests}`,
            errorsText(r),
            r.missedSlots === null ? '–' : String(r.missedSlots),
            fixed(r.rps),
            fixed(r.latencyMs.p50, 2),
            fixed(r.latencyMs.p99, 2),
            fixed(r.latencyMs.mean, 2),
            fixed(r.latencyMs.max, 2),
            ...(streams
              ? [
                  fixed(r.mode === 'stream' && r.bytesPerSec !== null ? r.bytesPerSec / 1e6 : null, 1),
                  rssText(r),
                ]
              : []),
            fixed(r.betweenCpuPerRequestUs),
            processCpu(r),
          ],
    ),
  };
}

function markdownTable(table: Table): string {
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(table.header), line(table.header.map(() => '---')), ...table.rows.map(line)].join('\n');
}

const FOOTNOTE =
  '"between CPU" is the CPU of the processes between the client and the backend (edge + agent; HAProxy + ' +
  'edge for a separate terminator) over the answered requests; direct rows have none. h2load reports no ' +
  'percentiles: its rows give the mean and the max. p99 of a fixed-rate HTTP/1.1 row is corrected for ' +
  'coordinated omission. "Skipped sends" (fixed-rate rows): sends due while no connection (HTTP/1.1) or ' +
  'stream (h2) was free, which a row that kept its rate has none of.';

export function renderSideBySideMarkdown(report: SideBySideReport, text: SideBySideText): string {
  const failed = report.result.rows.reduce((sum, r) => sum + errorTotal(r), 0);
  return (
    `${heading(text.title, report)}${text.intro}\n\n` +
    `## Targets\n\n${markdownTable(targetTable(report.result.targets))}\n\n` +
    `## Rows\n\n${markdownTable(rowTable(report.result.rows))}\n\n${FOOTNOTE}\n\n` +
    `Failed requests over all rows: ${failed}.\n${gateLine(report.gate)}`
  );
}

export function renderSideBySideHtml(report: SideBySideReport, text: SideBySideText): string {
  const { gate } = report;
  const gateHtml = gate.passed
    ? '<p>Gate: passed.</p>'
    : `<p>Gate: <strong>failed</strong></p><ul>${gate.violations.map((v) => `<li>${escapeXml(v)}</li>`).join('')}</ul>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tunnel2 bench: ${escapeXml(text.title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
code{background:#f4f4f4}.scroll{overflow-x:auto}</style></head><body>
<h1>tunnel2 bench: ${escapeXml(text.title)}</h1>
<p><code>${escapeXml(report.command)}</code> · ${escapeXml(report.startedAt)} · Node ${escapeXml(report.environment.node)} · ${report.environment.cpus} × ${escapeXml(report.environment.cpuModel)}</p>
<p>${escapeXml(text.intro)}</p>
<h2>Targets</h2>${htmlTable(targetTable(report.result.targets))}
<h2>Rows</h2>${htmlTable(rowTable(report.result.rows))}
<p>${escapeXml(FOOTNOTE)}</p>
${gateHtml}
</body></html>
`;
}
