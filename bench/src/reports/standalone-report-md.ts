import { fixed, marked } from '../measure/report-format.js';
import type { BenchReport } from '../plan/report-schema.js';
import {
  type BulkResult,
  type BulkTransfer,
  bulkSummaryLines,
  type RssTrace,
} from '../scenarios/bulk-scenario.js';
import { type FloorResult, summaryLines } from '../scenarios/floor-scenario.js';
import type { SessionsRedisResult } from '../scenarios/sessions-redis.js';
import type { SessionsResult } from '../scenarios/sessions-scenario.js';
import { lowSampleFootnote, worstSecondCells } from './report-seconds.js';

/** What report.json of a standalone scenario holds besides its result. */
export interface StandaloneReport<R> {
  command: string;
  startedAt: string;
  environment: BenchReport['environment'];
  result: R;
  gate: { passed: boolean; violations: string[] };
}

export function heading<R>(title: string, report: StandaloneReport<R>): string {
  const env = report.environment;
  return (
    `# tunnel2 bench: ${title}\n\n\`${report.command}\`\n\n` +
    `${report.startedAt} · tunnel2 ${env.tunnel2} · Node ${env.node} · ${env.cpus} × ${env.cpuModel} · ` +
    `${env.platform}/${env.arch}\n\n`
  );
}

export function gateLine(gate: { passed: boolean; violations: string[] }): string {
  return gate.passed
    ? '\nGate: passed.\n'
    : `\nGate: **failed**\n\n${gate.violations.map((v) => `- ${v}`).join('\n')}\n`;
}

function rss(trace: RssTrace | null): string {
  if (trace === null) return '–';
  return `${fixed(trace.startMb)} → peak ${fixed(trace.peakMb)} → ${fixed(trace.endMb)} MB · ${fixed(trace.cpuMs)} ms CPU`;
}

function warmupText(warmup: BulkTransfer['warmup']): string {
  if (warmup === null) return '–';
  return `${fixed(warmup.bytes / 2 ** 20)} MiB at ${warmup.error ?? `${fixed(warmup.mbPerSec)} MB/s`}`;
}

export function renderBulkMarkdown(report: StandaloneReport<BulkResult>): string {
  const { result } = report;
  const rows = result.transfers.map(
    (t) =>
      `| ${t.direction} | ${t.side} | ${fixed(t.bytes / 2 ** 20)} MiB | ${fixed(t.seconds, 2)} s | ` +
      `**${fixed(t.mbPerSec)}** | ${warmupText(t.warmup)} | ${rss(t.edge)} | ${rss(t.agent)} | ${rss(t.backend)} | ` +
      `${fixed(t.clientCpuMs)} ms | ` +
      `${t.error ?? ''} |`,
  );
  const ratios = bulkSummaryLines(result.ratios).map((line) => `- ${line}`);
  return (
    heading('Bulk transfers', report) +
    'One download (`GET /bytes/<n>`) and one upload (`POST /discard`) per side, streamed with backpressure ' +
    'at both ends. Sides: **direct** (the backend alone), **relay** (the byte floor of `pnpm bench floor`: ' +
    'two Node.js processes that multiplex the client connections over one TCP connection and copy bytes; its ' +
    "two processes fill the edge and agent columns) and **tunnel** (tunnel2's edge and agent). " +
    'MB/s = 10^6 bytes per second. RSS is sampled every 100 ms during the transfer. ' +
    (result.cold
      ? 'Cold (`--cold`): each transfer ran through freshly started processes, with no warm-up. '
      : 'Each transfer follows a discarded warm-up transfer of the same kind, whose rate is shown beside it. ') +
    'The client ' +
    'reads and writes a raw socket (bench/src/measure/bulk-client.ts); its own CPU is shown too, as it shares the ' +
    'machine with the processes it measures.\n\n' +
    '| direction | side | bytes | time | MB/s | warm-up (discarded) | edge RSS · CPU | agent RSS · CPU | backend RSS · CPU | client CPU | error |\n' +
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' +
    `${rows.join('\n')}\n` +
    (ratios.length > 0 ? `\n${ratios.join('\n')}\n` : '') +
    gateLine(report.gate)
  );
}

function redisSection(r: SessionsRedisResult | null): string {
  if (r === null) return '';
  const byName = Object.entries(r.commandsByName)
    .sort(([, a], [, b]) => b - a)
    .map(([name, calls]) => `${name} ${calls}`)
    .join(', ');
  return (
    '## The Redis registry (cluster mode)\n\n' +
    `The edge ran as a cluster node against its own redis-server, lease ${fixed(r.leaseTtlSec, 1)} s (renewed ` +
    `every ${fixed(r.renewIntervalSec, 2)} s, all of a node's leases in one renewMany, pipelined in batches of ` +
    `${r.renewBatchSize}). Redis is read with INFO before the sessions connect, once they are open and after ` +
    "the idle period; commands include those run inside the Lua scripts; the bench's INFO calls are left out. " +
    'Round trips = renewal rounds × batches per round; socket reads (measured) bound them from above.\n\n' +
    '| renewal rounds while idle | commands per session per round | **per lease** | scripts per session per round | round trips | **round trips per session per lease** | socket reads | reads per session per lease | claim commands per session |\n' +
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' +
    `| ${r.renewalRounds} | ${fixed(r.commandsPerSessionPerRound, 2)} | **${fixed(r.commandsPerSessionPerLease, 2)}** | ` +
    `${fixed(r.scriptCallsPerSessionPerRound, 2)} | ${r.roundTrips} | **${fixed(r.roundTripsPerSessionPerLease, 4)}** | ` +
    `${r.socketReads} | ${fixed(r.socketReadsPerSessionPerLease, 4)} | ${fixed(r.connectCommandsPerSession, 1)} |\n\n` +
    '| Redis used_memory before | after | **bytes per session** | Redis RSS after | Redis CPU per claim | Redis CPU while idle |\n' +
    '| --- | --- | --- | --- | --- | --- |\n' +
    `| ${fixed(r.usedMemoryBeforeMb, 1)} MB | ${fixed(r.usedMemoryAfterMb, 1)} MB | **${fixed(r.bytesPerSession)}** | ` +
    `${fixed(r.redisRssAfterMb, 1)} MB | ${fixed(r.redisConnectCpuUsPerSession)} µs | ${fixed(r.redisIdleCpuMsPerSec, 1)} ms/s |\n\n` +
    `Commands while idle: ${byName || 'none'}.\n\n`
  );
}

export function renderSessionsMarkdown(report: StandaloneReport<SessionsResult>): string {
  const { sessions: s, streams: t, redis } = report.result;
  return (
    heading('Sessions and streams', report) +
    '## Idle sessions on one edge\n\n' +
    'Light in-process agents (one WebSocket and one protocol session each) connect to a real `tunnel2 server` ' +
    `(${report.result.registry} registry); the edge RSS is read from /proc before and after they idle ` +
    '(heartbeats and lease renewals running).\n\n' +
    '| sessions | opened | lost while idle | connect time | claims/s | idle | edge RSS before | after | peak | **KB per session** | edge CPU while idle |\n' +
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' +
    `| ${s.requested} | ${s.opened} | ${s.lostWhileIdle} | ${fixed(s.connectSec, 1)} s | ${fixed(s.claimsPerSec)} | ${s.idleSec} s | ` +
    `${fixed(s.edgeRssBeforeMb, 1)} MB | ${fixed(s.edgeRssAfterMb, 1)} MB | ${fixed(s.edgePeakRssMb, 1)} MB | ` +
    `**${fixed(s.edgeKbPerSession, 1)}** | ${fixed(s.edgeIdleCpuMsPerSec, 1)} ms/s |\n\n` +
    redisSection(redis) +
    '## Concurrent streams in one session\n\n' +
    'Every request goes to the same session; the agent holds each stream until all are open at once, then ' +
    'answers each with its own request target, which the client checks.\n\n' +
    '| streams | open at once (max) | answered | wrong | failed | time |\n' +
    '| --- | --- | --- | --- | --- | --- |\n' +
    `| ${t.requested} | ${t.maxConcurrent} | ${t.answered} | ${t.wrong} | ${t.failed} | ${fixed(t.durationMs)} ms |\n` +
    gateLine(report.gate)
  );
}

export function renderFloorMarkdown(report: StandaloneReport<FloorResult>): string {
  const { settings, stages, summary } = report.result;
  const rows = stages.map(
    (s) =>
      `| ${s.side} | ${s.mode === 'rate' ? `${s.targetRps} RPS` : 'closed loop'} | ${s.connections} | ` +
      `${s.ok}/${s.requests} | **${fixed(s.rps)}** | ${marked(fixed(s.p50Ms, 2), 'p50', s.lowSamplePercentiles)} | ` +
      `${marked(fixed(s.p99Ms, 2), 'p99', s.lowSamplePercentiles)} | ${worstSecondCells(s.perSecond).join(' | ')} | ` +
      `${fixed(s.backendCpuPerRequestUs)} | ${fixed(s.edgeCpuPerRequestUs)} | ` +
      `${fixed(s.agentCpuPerRequestUs)} | ` +
      `**${fixed(s.betweenCpuPerRequestUs)}** |`,
  );
  return (
    heading('Floor: the tunnel beside a bare Node.js relay and a bare HTTP relay', report) +
    'Four sides answer `GET /loadtest/get` from the same backend process: **direct**; **relay**, two Node.js ' +
    'processes that multiplex the client connections over one TCP connection and only copy bytes (no HTTP, no ' +
    'flow control, no limits: the least a Node.js tunnel of this shape can cost, the byte floor); ' +
    '**http-relay**, the same shape HTTP-aware (a node:http server, each request head and body framed over one ' +
    "TCP connection, an undici Pool to the backend, nothing else: the HTTP floor); and **tunnel**, tunnel2's " +
    'edge and agent. Each side runs a fixed-rate stage and a closed-loop stage after a discarded ' +
    `${settings.warmupSec} s warm-up. CPU is user + system time per answered request, in µs.\n\n` +
    '| side | stage | connections | ok | rate (req/s) | p50 (ms) | p99 (ms) | worst second p99 (ms) | lowest second (req/s) | ' +
    'backend CPU (µs/req) | edge CPU (µs/req) | agent CPU (µs/req) | edge + agent CPU (µs/req) |\n' +
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n' +
    `${rows.join('\n')}\n\n` +
    lowSampleFootnote(stages) +
    summaryLines(summary, settings)
      .map((line) => `- ${line}\n`)
      .join('') +
    gateLine(report.gate)
  );
}
