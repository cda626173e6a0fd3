import { fixed, marked } from '../measure/report-format.js';
import type { LatencySummary, WanDirection, WanResult, WanTransfer } from '../scenarios/wan-scenario.js';
import { lowSampleFootnote } from './report-seconds.js';
import { gateLine, heading, type StandaloneReport } from './standalone-report-md.js';

/**
 * Issue #21's targets. Both throughput targets (60 MB/s at 50 ms, 30 MB/s at 100 ms) are 3 MB per round trip,
 * so at any `--rtt` the tunnel must carry 3,000 / rtt MB/s; the link alone must carry 3× that, or the run
 * measured the link. A small request during a bulk download: its time to first byte within one round trip +
 * 5 ms (its p50: head-of-line blocking would delay every sample, not a few).
 */
export const WAN_TARGETS = { mbPerRoundTrip: 3, linkHeadroom: 3, ttfbSlackMs: 5 } as const;

export interface WanTarget {
  what: string;
  comparison: '>=' | '<=';
  limit: number;
  measured: number | null;
  unit: 'MB/s' | 'ms';
  met: boolean;
}

export interface WanGate {
  passed: boolean;
  violations: string[];
  targets: WanTarget[];
}

export function tunnelTargetMBps(rttMs: number): number {
  return (WAN_TARGETS.mbPerRoundTrip * 1000) / rttMs;
}

function target(
  what: string,
  comparison: WanTarget['comparison'],
  limit: number,
  measured: number | null,
  unit: WanTarget['unit'],
): WanTarget {
  const met = measured !== null && (comparison === '>=' ? measured >= limit : measured <= limit);
  return { what, comparison, limit: Math.round(limit * 100) / 100, measured, unit, met };
}

/** Every target met and nothing failed: a lost or wrong byte fails the run whatever its speed. */
export function wanGate(result: WanResult): WanGate {
  const rtt = result.settings.rttMs;
  const tunnelMin = tunnelTargetMBps(rtt);
  const rate = (t: WanTransfer): number | null =>
    t.error === null ? Math.round(t.mbPerSec * 10) / 10 : null;
  const targets = [
    target('download through the tunnel', '>=', tunnelMin, rate(result.download.tunnel), 'MB/s'),
    target('upload through the tunnel', '>=', tunnelMin, rate(result.upload.tunnel), 'MB/s'),
    target(
      'download direct through the link alone',
      '>=',
      WAN_TARGETS.linkHeadroom * tunnelMin,
      rate(result.download.direct),
      'MB/s',
    ),
    target(
      'upload direct through the link alone',
      '>=',
      WAN_TARGETS.linkHeadroom * tunnelMin,
      rate(result.upload.direct),
      'MB/s',
    ),
    target(
      'time to first byte of a small request during a download (p50)',
      '<=',
      rtt + WAN_TARGETS.ttfbSlackMs,
      result.ttfb.bulkError === null ? result.ttfb.underLoad.p50Ms : null,
      'ms',
    ),
  ];
  const violations: string[] = [];
  const transfers: [string, WanTransfer][] = [
    ['download direct', result.download.direct],
    ['download tunnel', result.download.tunnel],
    ['upload direct', result.upload.direct],
    ['upload tunnel', result.upload.tunnel],
    ['parallel direct', result.parallel.direct],
    ['parallel tunnel', result.parallel.tunnel],
  ];
  for (const [label, t] of transfers) if (t.error !== null) violations.push(`${label}: ${t.error}`);
  if (result.ttfb.bulkError !== null) violations.push(`time to first byte: ${result.ttfb.bulkError}`);
  for (const s of [result.ttfb.direct, result.ttfb.idle, result.ttfb.underLoad]) {
    if (s.failed > 0) violations.push(`time to first byte: ${s.failed} small requests failed`);
  }
  for (const t of targets) {
    if (!t.met) {
      violations.push(
        `${t.what}: ${t.measured === null ? 'not measured' : `${fixed(t.measured, 1)} ${t.unit}`} ` +
          `(target ${t.comparison === '>=' ? '≥' : '≤'} ${fixed(t.limit, 1)} ${t.unit})`,
      );
    }
  }
  return { passed: violations.length === 0, violations, targets };
}

const mb = (n: number | null): string => (n === null ? '–' : `${fixed(n)} MB`);

function transferRow(label: string, side: 'direct' | 'tunnel', t: WanTransfer): string {
  const usage = (u: WanTransfer['edge']): string =>
    u === null ? '–' : `${fixed(u.peakRssMb)} MB · ${fixed(u.cpuMs)} ms`;
  return (
    `| ${label} | ${side} | ${fixed(t.bytes / 2 ** 20)} MiB | ${fixed(t.seconds, 2)} s | **${fixed(t.mbPerSec, 1)}** | ` +
    `${t.timeLimited ? 'yes' : 'no'} | ${t.verified ? 'yes' : 'no'} | ${usage(t.edge)} | ${usage(t.agent)} | ` +
    `${fixed(t.benchCpuMs)} ms | ${t.error ?? ''} |`
  );
}

function latencyRow(label: string, s: LatencySummary): string {
  const ms = (n: number | null): string => (n === null ? '–' : fixed(n, 2));
  const flagged = s.lowSamplePercentiles;
  return (
    `| ${label} | ${s.samples} | ${s.failed} | ${marked(ms(s.p50Ms), 'p50', flagged)} | ` +
    `${marked(ms(s.p95Ms), 'p95', flagged)} | ${ms(s.maxMs)} |`
  );
}

export function renderWanMarkdown(report: StandaloneReport<WanResult> & { gate: WanGate }): string {
  const { result, gate } = report;
  const { settings: s } = result;
  const rows = (
    [
      ['download', result.download],
      ['upload', result.upload],
      [`${s.parallelStreams} × ${fixed(s.parallelBytesEach / 2 ** 20)} MiB downloads`, result.parallel],
    ] as [string, WanDirection][]
  ).flatMap(([label, d]) => [transferRow(label, 'direct', d.direct), transferRow(label, 'tunnel', d.tunnel)]);
  const targetRows = gate.targets.map(
    (t) =>
      `| ${t.what} | ${t.comparison === '>=' ? '≥' : '≤'} ${fixed(t.limit, 1)} ${t.unit} | ` +
      `${t.measured === null ? '–' : `${fixed(t.measured, 1)} ${t.unit}`} | ${t.met ? 'met' : '**missed**'} |`,
  );
  return (
    heading(`WAN link: ${s.rttMs} ms round trip`, report) +
    `The agent reaches the edge through a userspace delay link (${s.rttMs / 2} ms each way, at most ` +
    `${fixed(s.linkBufferBytes / 2 ** 20)} MiB held per direction); the client talks to the edge on loopback. ` +
    '**direct** is the same transfer from the client to the backend through a second link of the same round ' +
    'trip: what the link alone carries. Downloads are `GET /bytes/<n>`, uploads a chunked `POST /upload`; the ' +
    `SHA-256 of what moved is checked. Each transfer stops after ${s.timeLimitSec} s (time-limited: the rate ` +
    'is over what moved). MB/s = 10^6 bytes per second; peak RSS and CPU over the transfer.\n\n' +
    '| transfer | side | moved | time | MB/s | time-limited | SHA-256 ok | edge peak RSS · CPU | agent peak RSS · CPU | bench CPU | error |\n' +
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' +
    `${rows.join('\n')}\n\n` +
    `Edge peak RSS ${mb(result.edgePeakRssMb)}, agent peak RSS ${mb(result.agentPeakRssMb)} (all tunnel phases).\n\n` +
    `## Time to first byte of \`GET /loadtest/get\` through the tunnel (every ${s.ttfbIntervalMs} ms)\n\n` +
    '| when | samples | failed | p50 (ms) | p95 (ms) | max (ms) |\n| --- | --- | --- | --- | --- | --- |\n' +
    `${latencyRow('direct through the link alone (its real round trip + the backend)', result.ttfb.direct)}\n` +
    `${latencyRow('tunnel, idle', result.ttfb.idle)}\n` +
    `${latencyRow(`tunnel, during a ${fixed(result.ttfb.bulkMBps, 1)} MB/s download on the same session`, result.ttfb.underLoad)}\n` +
    `${latencyRow(`direct through the link, during a ${fixed(result.ttfb.directBulkMBps, 1)} MB/s direct download through it`, result.ttfb.directUnderLoad)}\n\n` +
    `The bench process (the client) had an event-loop delay of p50 ${fixed(result.ttfb.benchLoopDelayMs.p50, 2)} ms, ` +
    `max ${fixed(result.ttfb.benchLoopDelayMs.max, 2)} ms while the samples under load ran: that much of them is the instrument's.\n\n` +
    lowSampleFootnote([
      result.ttfb.direct,
      result.ttfb.idle,
      result.ttfb.underLoad,
      result.ttfb.directUnderLoad,
    ]) +
    '## Targets (issue #21)\n\n| target | limit | measured | status |\n| --- | --- | --- | --- |\n' +
    `${targetRows.join('\n')}\n` +
    gateLine(gate)
  );
}
