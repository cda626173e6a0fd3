import { fixed, marked, ratioOf } from '../measure/report-format.js';
import type { RssTrace } from '../scenarios/bulk-scenario.js';
import type { TcpRatios, TcpResult, TcpTransfer } from '../scenarios/tcp-scenario.js';
import { htmlTable } from './report-html.js';
import { lowSampleFootnote, worstSecondCells } from './report-seconds.js';
import type { Table } from './report-tables.js';
import { gateLine, heading, type StandaloneReport } from './standalone-report-md.js';
import { escapeXml } from './svg-charts.js';

/** `pnpm bench tcp`'s gates; null: not gated. Failed requests and failed transfers always fail the gate. */
export interface TcpGateSettings {
  /** Closed loop: tunnel RPS / direct RPS at least this (median over rounds). */
  minRatio: number | null;
  /** Edge + agent CPU per request in the tunnel's closed loop at most this, µs (median over rounds). */
  maxCpuUs: number | null;
  /** Each tunnel transfer (download, upload) at least this, MB/s. */
  minMbps: number | null;
}

export interface TcpGate {
  passed: boolean;
  violations: string[];
  settings: TcpGateSettings;
}

export function tcpGate(result: TcpResult, settings: TcpGateSettings): TcpGate {
  const violations: string[] = [];
  for (const s of result.closedLoop) {
    if (s.errors > 0 || s.ok !== s.requests) {
      violations.push(`${s.side} round ${s.round}: ${s.errors} of ${s.requests} requests failed`);
    }
  }
  for (const t of result.transfers) {
    if (t.error !== null) violations.push(`${t.direction} ${t.side}: ${t.error}`);
    else if (settings.minMbps !== null && t.side === 'tunnel' && t.mbPerSec < settings.minMbps) {
      violations.push(`${t.direction} tunnel: ${t.mbPerSec.toFixed(0)} MB/s < ${settings.minMbps}`);
    }
  }
  const { tunnelOverDirectRps: ratio, tunnelCpuPerRequestUs: cpu } = result.summary;
  if (settings.minRatio !== null && !(ratio !== null && ratio >= settings.minRatio)) {
    violations.push(`closed loop tunnel / direct ${fixed(ratio, 2)} < ${settings.minRatio}`);
  }
  if (settings.maxCpuUs !== null && !(cpu !== null && cpu <= settings.maxCpuUs)) {
    violations.push(`tunnel CPU ${fixed(cpu)} µs per request > ${settings.maxCpuUs}`);
  }
  return { passed: violations.length === 0, violations, settings };
}

function closedLoopTable(result: TcpResult): Table {
  return {
    header: [
      'side',
      'round',
      'ok',
      'rate (req/s)',
      'p50 (ms)',
      'p99 (ms)',
      'worst second p99 (ms)',
      'lowest second (req/s)',
      'backend CPU (µs/req)',
      'edge (µs/req)',
      'agent (µs/req)',
      'edge + agent (µs/req)',
      'peak RSS edge / agent',
      'load generator CPU',
    ],
    rows: result.closedLoop.map((s) => [
      s.side,
      String(s.round),
      `${s.ok}/${s.requests}`,
      fixed(s.rps),
      marked(fixed(s.p50Ms, 2), 'p50', s.lowSamplePercentiles),
      marked(fixed(s.p99Ms, 2), 'p99', s.lowSamplePercentiles),
      ...worstSecondCells(s.perSecond),
      fixed(s.backendCpuPerRequestUs),
      fixed(s.edgeCpuPerRequestUs),
      fixed(s.agentCpuPerRequestUs),
      fixed(s.tunnelCpuPerRequestUs),
      s.side === 'direct' ? '–' : `${fixed(s.edgePeakRssMb)} / ${fixed(s.agentPeakRssMb)} MB`,
      `${fixed(s.clientCpuPct)} %`,
    ]),
  };
}

const rss = (t: RssTrace | null): string =>
  t === null
    ? '–'
    : `${fixed(t.startMb)} → ${fixed(t.peakMb)} → ${fixed(t.endMb)} MB · ${fixed(t.cpuMs)} ms CPU`;

function transferTable(transfers: TcpTransfer[]): Table {
  return {
    header: [
      'direction',
      'side',
      'MiB',
      'time',
      'MB/s',
      'warm-up (discarded)',
      'edge RSS · CPU',
      'agent RSS · CPU',
      'client CPU',
      'error',
    ],
    rows: transfers.map((t) => [
      t.direction,
      t.side,
      fixed(t.bytes / 2 ** 20),
      `${fixed(t.seconds, 2)} s`,
      fixed(t.mbPerSec),
      t.warmup === null ? '–' : (t.warmup.error ?? `${fixed(t.warmup.mbPerSec)} MB/s`),
      rss(t.edge),
      rss(t.agent),
      `${fixed(t.clientCpuMs)} ms`,
      t.error ?? '',
    ]),
  };
}

/**
 * How much an edge's or an agent's RSS may grow over one transfer and still count as flat: bounded buffers
 * and allocator slack (+1 to +13 MB measured over a GiB, bench/README.md), not a growth with the bytes moved
 * (a GiB held would be +1,024 MB).
 */
const FLAT_RSS_TOLERANCE_MB = 32;

/** The targets of issue #16 beside what this run measured. */
function targetTable(result: TcpResult): Table {
  const s = result.summary;
  const status = (met: boolean | null): string => (met === null ? 'not measured' : met ? 'met' : 'missed');
  const tunnelTransfers = result.transfers.filter((t) => t.side === 'tunnel');
  const flat = tunnelTransfers.map((t) =>
    t.edge && t.agent
      ? Math.max(t.edge.peakMb - t.edge.startMb, t.agent.peakMb - t.agent.startMb)
      : Number.NaN,
  );
  const growth = flat.length === 0 ? null : Math.max(...flat);
  const mbps = [s.downloadMbps.tunnel, s.uploadMbps.tunnel];
  return {
    header: ['target', 'measured', 'status'],
    rows: [
      [
        `closed loop at ${result.settings.connections} connections ≥ 0.5 × direct`,
        `${fixed(s.tunnelOverDirectRps, 2)}× (${fixed(s.tunnelRps)} / ${fixed(s.directRps)} RPS)`,
        status(s.tunnelOverDirectRps === null ? null : s.tunnelOverDirectRps >= 0.5),
      ],
      [
        'edge + agent CPU per request ≤ 60 µs at saturation',
        `${fixed(s.tunnelCpuPerRequestUs)} µs`,
        status(s.tunnelCpuPerRequestUs === null ? null : s.tunnelCpuPerRequestUs <= 60),
      ],
      [
        `${fixed(result.settings.bytes / 2 ** 20)} MiB each way ≥ 800 MB/s`,
        `download ${fixed(s.downloadMbps.tunnel)}, upload ${fixed(s.uploadMbps.tunnel)} MB/s`,
        status(mbps.some((m) => m === null) ? null : mbps.every((m) => m !== null && m >= 800)),
      ],
      [
        `flat RSS (edge and agent): at most +${FLAT_RSS_TOLERANCE_MB} MB over a transfer`,
        growth === null || Number.isNaN(growth) ? '–' : `at most +${fixed(growth)} MB over a transfer`,
        status(growth === null || Number.isNaN(growth) ? null : growth <= FLAT_RSS_TOLERANCE_MB),
      ],
    ],
  };
}

const times = (x: number | null | undefined): string => (x == null ? '–' : `${fixed(x, 2)}×`);

/**
 * The floor beside direct and the tunnel: whether a target is out of reach of any Node.js tunnel of this
 * shape here (the floor misses it too) or of tunnel2 only (the floor meets it).
 */
function floorTable(result: TcpResult): Table | null {
  const s = result.summary;
  if (result.settings.floor === false || s.ratios === undefined) return null;
  const peakRss = (side: 'floor' | 'tunnel'): string => {
    const traces = result.transfers
      .filter((t) => t.side === side)
      .flatMap((t) => [t.edge, t.agent])
      .filter((t): t is RssTrace => t !== null);
    if (traces.length === 0) return '–';
    return `+${fixed(Math.max(...traces.map((t) => t.peakMb - t.startMb)))} MB (peak ${fixed(Math.max(...traces.map((t) => t.peakMb)))})`;
  };
  const row = (
    what: string,
    d: number | null | undefined,
    f: number | null | undefined,
    t: number | null | undefined,
    r: TcpRatios,
  ): string[] => [
    what,
    fixed(d),
    fixed(f),
    fixed(t),
    times(r.tunnelOverDirect),
    times(r.floorOverDirect),
    times(r.tunnelOverFloor),
  ];
  const cpu = (x: number | null | undefined): string => (x == null ? '–' : `${fixed(x)} µs/req`);
  // CPU per GiB moved holds on a shared machine, where MB/s follows whatever else is running.
  const perGiB = (direction: TcpTransfer['direction'], side: 'floor' | 'tunnel'): number | null => {
    const t = result.transfers.find((x) => x.direction === direction && x.side === side);
    if (t === undefined || t.error !== null || t.edge === null || t.agent === null || t.bytes === 0)
      return null;
    return ((t.edge.cpuMs + t.agent.cpuMs) / 1000) * (2 ** 30 / t.bytes);
  };
  const cpuRow = (direction: TcpTransfer['direction']): string[] => {
    const [f, t] = [perGiB(direction, 'floor'), perGiB(direction, 'tunnel')];
    const s = (x: number | null): string => (x === null ? '–' : `${fixed(x, 2)} s`);
    return [`${direction}: edge + agent CPU per GiB`, '–', s(f), s(t), '–', '–', times(ratioOf(t, f))];
  };
  return {
    header: ['measure', 'direct', 'floor', 'tunnel', 'tunnel ÷ direct', 'floor ÷ direct', 'tunnel ÷ floor'],
    rows: [
      row('closed loop RPS (median)', s.directRps, s.floorRps, s.tunnelRps, s.ratios.rps),
      [
        'edge + agent CPU per request (median)',
        '–',
        cpu(s.floorCpuPerRequestUs),
        cpu(s.tunnelCpuPerRequestUs),
        '–',
        '–',
        times(ratioOf(s.tunnelCpuPerRequestUs, s.floorCpuPerRequestUs)),
      ],
      row(
        'download MB/s',
        s.downloadMbps.direct,
        s.downloadMbps.floor,
        s.downloadMbps.tunnel,
        s.ratios.download,
      ),
      row('upload MB/s', s.uploadMbps.direct, s.uploadMbps.floor, s.uploadMbps.tunnel, s.ratios.upload),
      cpuRow('download'),
      cpuRow('upload'),
      ['RSS growth over a transfer (edge or agent)', '–', peakRss('floor'), peakRss('tunnel'), '–', '–', '–'],
    ],
  };
}

const FLOOR_INTRO =
  'The floor: two bare Node.js processes (`relay-floor-process.ts`) that multiplex the client connections over ' +
  'one TCP connection with an 8-byte header and the simplest bounded backpressure, nothing else, measured ' +
  'alternately with direct and the tunnel. A target the floor misses is out of reach of any Node.js tunnel of ' +
  "this shape on this machine; one it meets and the tunnel misses is tunnel2's own cost.";

function mdTable(table: Table): string {
  return (
    `| ${table.header.join(' | ')} |\n| ${table.header.map(() => '---').join(' | ')} |\n` +
    `${table.rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`
  );
}

const INTRO =
  'A TCP tunnel (`tunnel2 tcp <backend port>` through `tunnel2 server --tcp-ports`) beside the backend reached ' +
  'directly, in one run. The tunnel carries the HTTP as opaque bytes; every load connection is one public TCP ' +
  'connection and one stream. Closed-loop stages (`GET` of a small answer) alternate direct, the floor (below) ' +
  'and the tunnel after a ' +
  'discarded warm-up of each; CPU is user + system time of all threads from /proc per answered request. The ' +
  "load generator's own CPU is shown: near 100 % of a core it set the pace, not the side it measured. " +
  'Transfers: one `GET /bytes/<n>` and one `POST /discard` per side, RSS sampled every 100 ms. MB/s = 10^6 bytes/s.';

export function renderTcpMarkdown(report: StandaloneReport<TcpResult> & { gate: TcpGate }): string {
  const { result } = report;
  const floor = floorTable(result);
  return (
    heading('TCP tunnel', report) +
    `${INTRO}\n\n## Targets (issue #16)\n\n${mdTable(targetTable(result))}\n` +
    `## Closed loop, ${result.settings.connections} connections, ${result.settings.durationSec} s per stage\n\n` +
    `${mdTable(closedLoopTable(result))}\n` +
    lowSampleFootnote(result.closedLoop) +
    (floor === null ? '' : `## The floor\n\n${FLOOR_INTRO}\n\n${mdTable(floor)}\n`) +
    (result.transfers.length > 0 ? `## Transfers\n\n${mdTable(transferTable(result.transfers))}` : '') +
    gateLine(report.gate)
  );
}

export function renderTcpHtml(report: StandaloneReport<TcpResult> & { gate: TcpGate }): string {
  const { result, gate } = report;
  const floor = floorTable(result);
  const gateHtml = gate.passed
    ? '<p>Gate: passed.</p>'
    : `<p>Gate: <strong>failed</strong></p><ul>${gate.violations.map((v) => `<li>${escapeXml(v)}</li>`).join('')}</ul>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tunnel2 bench: TCP tunnel</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:75em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
code{background:#f4f4f4}.scroll{overflow-x:auto}</style></head><body>
<h1>tunnel2 bench: TCP tunnel</h1>
<p><code>${escapeXml(report.command)}</code> · ${escapeXml(report.startedAt)} · Node ${escapeXml(report.environment.node)} · ${report.environment.cpus} × ${escapeXml(report.environment.cpuModel)}</p>
<p>${escapeXml(INTRO)}</p>
<h2>Targets (issue #16)</h2>${htmlTable(targetTable(result))}
<h2>Closed loop, ${result.settings.connections} connections</h2>${htmlTable(closedLoopTable(result))}
${lowSampleFootnote(result.closedLoop)
  .split('\n\n')
  .filter((note) => note !== '')
  .map((note) => `<p>${escapeXml(note)}</p>`)
  .join('')}
${floor === null ? '' : `<h2>The floor</h2><p>${escapeXml(FLOOR_INTRO)}</p>${htmlTable(floor)}`}
${result.transfers.length > 0 ? `<h2>Transfers</h2>${htmlTable(transferTable(result.transfers))}` : ''}
${gateHtml}
</body></html>
`;
}
