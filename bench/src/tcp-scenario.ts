import { mkdirSync } from 'node:fs';
import {
  type BenchStack,
  jsonEvent,
  type LoadTarget,
  startBackendService,
  startEdgeService,
  tunnel2Bin,
} from './bench-stack.js';
import { type BulkTransfer, runBulkBench } from './bulk-scenario.js';
import { type ChildService, startChildService } from './child-service.js';
import { type LoadTick, runLoad } from './load-runner.js';
import { meterProcess, meterSelf } from './process-stats.js';
import { fixed } from './report-format.js';
import type { SideName } from './report-schema.js';
import { perRequestUs } from './side-report.js';

/*
 * `pnpm bench tcp`: a TCP tunnel (`tunnel2 tcp <backend port>` against `tunnel2 server --tcp-ports`) beside
 * the backend reached directly, in one run. The TCP tunnel carries the backend's HTTP as opaque bytes, so
 * the same HTTP load and the same bulk client measure both sides:
 * - closed loop at --connections (each autocannon connection is one public TCP connection, one stream):
 *   requests/s each side, their ratio, and the edge's + agent's CPU per request from /proc;
 * - one large download and one large upload each way (bulk-scenario.ts) with the edge's and the agent's RSS.
 * Direct and tunnel closed-loop stages alternate `rounds` times; the summary takes their medians.
 */

export interface TcpSettings {
  connections: number;
  durationSec: number;
  warmupSec: number;
  /** Direct and tunnel closed-loop stages, alternated this many times. */
  rounds: number;
  path: string;
  /** Bulk transfer size each way, bytes; 0 skips the transfers. */
  bytes: number;
  warmupBytes: number;
  /** Where the edge and the agent write V8 CPU profiles (`node --cpu-prof`), or null. */
  cpuProfDir: string | null;
}

export interface TcpLoadStage {
  side: SideName;
  round: number;
  connections: number;
  durationSec: number;
  requests: number;
  ok: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU (user + system, all threads) per answered request, µs; 10 ms clock ticks. */
  backendCpuPerRequestUs: number | null;
  edgeCpuPerRequestUs: number | null;
  agentCpuPerRequestUs: number | null;
  /** edge + agent: what the tunnel adds. null on the direct side. */
  tunnelCpuPerRequestUs: number | null;
  edgePeakRssMb: number | null;
  agentPeakRssMb: number | null;
  /**
   * The load generator's own CPU (this process, autocannon included), % of one core: near 100 it, not the
   * side under test, set the pace, and the ratio understates what the faster side could do.
   */
  clientCpuPct: number | null;
}

export interface TcpSummary {
  /** Medians over the rounds. */
  directRps: number | null;
  tunnelRps: number | null;
  tunnelOverDirectRps: number | null;
  tunnelCpuPerRequestUs: number | null;
  downloadMbps: { direct: number | null; tunnel: number | null };
  uploadMbps: { direct: number | null; tunnel: number | null };
}

export interface TcpResult {
  scenario: 'tcp';
  settings: TcpSettings;
  stack: { backendUrl: string; edgeUrl: string; tcpUrl: string; tcpPortRange: string };
  closedLoop: TcpLoadStage[];
  transfers: BulkTransfer[];
  summary: TcpSummary;
}

/** The edge skips ports another process holds, so the range need only be mostly free. */
function tcpPortRange(): string {
  const first = 20_000 + Math.floor(Math.random() * 10_000);
  return `${first}-${first + 31}`;
}

function profEnv(dir: string | null, role: string): NodeJS.ProcessEnv | undefined {
  if (dir === null) return undefined;
  const at = `${dir}/${role}`;
  mkdirSync(at, { recursive: true });
  return { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${at}` };
}

function startTcpAgent(backendPort: number, edgeUrl: string, env: NodeJS.ProcessEnv | undefined) {
  return startChildService({
    name: 'agent (tunnel2 tcp)',
    args: [tunnel2Bin(), 'tcp', String(backendPort), '--server', edgeUrl, '--json', '--log-level', 'warn'],
    ready: (line) => {
      const url = jsonEvent(line, 'ready')?.url;
      return typeof url === 'string' && url.startsWith('tcp://') ? url : undefined;
    },
    ...(env === undefined ? {} : { env }),
  });
}

const median = (values: number[]): number | null => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

interface Side {
  name: SideName;
  target: LoadTarget;
}

async function runStage(
  stack: BenchStack,
  side: Side,
  round: number,
  settings: TcpSettings,
  durationSec: number,
  onTick: (tick: LoadTick) => void,
): Promise<TcpLoadStage> {
  const tunnel = side.name === 'tunnel';
  const meters = [stack.backend, tunnel ? stack.edge : undefined, tunnel ? stack.agent : undefined].map(
    (s) => (s === undefined ? undefined : meterProcess(s.pid)),
  );
  const client = meterSelf();
  const load = await runLoad({
    target: side.target,
    path: settings.path,
    connections: settings.connections,
    durationSec,
    ratePerSec: undefined,
    timeoutSec: 10,
    onTick,
  });
  const clientCpuPct = client.stop()?.cpuPct ?? null;
  const usages = meters.map((m) => m?.stop() ?? undefined);
  const { ok, finished } = load.outcomes;
  const [backend, edge, agent] = usages.map((u) => perRequestUs(u?.cpuMs, ok));
  return {
    side: side.name,
    round,
    connections: settings.connections,
    durationSec: load.durationSec,
    requests: finished,
    ok,
    errors: load.outcomes.errorCount(),
    rps: ok / load.durationSec,
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    backendCpuPerRequestUs: backend ?? null,
    edgeCpuPerRequestUs: edge ?? null,
    agentCpuPerRequestUs: agent ?? null,
    tunnelCpuPerRequestUs: edge != null && agent != null ? edge + agent : null,
    edgePeakRssMb: usages[1]?.peakRssMb ?? null,
    agentPeakRssMb: usages[2]?.peakRssMb ?? null,
    clientCpuPct,
  };
}

export function summarizeTcp(stages: TcpLoadStage[], transfers: BulkTransfer[]): TcpSummary {
  const of = (side: SideName) => stages.filter((s) => s.side === side);
  const directRps = median(of('direct').map((s) => s.rps));
  const tunnelRps = median(of('tunnel').map((s) => s.rps));
  const mbps = (direction: BulkTransfer['direction'], side: SideName): number | null => {
    const t = transfers.find((x) => x.direction === direction && x.side === side);
    return t === undefined || t.error !== null ? null : t.mbPerSec;
  };
  return {
    directRps,
    tunnelRps,
    tunnelOverDirectRps:
      directRps !== null && tunnelRps !== null && directRps > 0 ? tunnelRps / directRps : null,
    tunnelCpuPerRequestUs: median(of('tunnel').flatMap((s) => s.tunnelCpuPerRequestUs ?? [])),
    downloadMbps: { direct: mbps('download', 'direct'), tunnel: mbps('download', 'tunnel') },
    uploadMbps: { direct: mbps('upload', 'direct'), tunnel: mbps('upload', 'tunnel') },
  };
}

function stageLine(stage: TcpLoadStage): string {
  return (
    `${stage.side} round ${stage.round}: ${fixed(stage.rps)} rps, ${stage.errors} errors, ` +
    `p99 ${fixed(stage.p99Ms, 2)} ms, load generator ${fixed(stage.clientCpuPct)} % CPU, ` +
    `backend ${fixed(stage.backendCpuPerRequestUs)} µs/req` +
    (stage.tunnelCpuPerRequestUs === null
      ? ''
      : `, tunnel ${fixed(stage.tunnelCpuPerRequestUs)} µs/req (edge ${fixed(stage.edgeCpuPerRequestUs)} + ` +
        `agent ${fixed(stage.agentCpuPerRequestUs)})`)
  );
}

export async function runTcpBench(settings: TcpSettings, note: (line: string) => void): Promise<TcpResult> {
  const started: ChildService[] = [];
  try {
    const backend = await startBackendService();
    started.push(backend);
    const range = tcpPortRange();
    const edge = await startEdgeService(['--tcp-ports', range], profEnv(settings.cpuProfDir, 'edge'));
    started.push(edge);
    const backendPort = Number(new URL(backend.readyValue).port);
    const agent = await startTcpAgent(backendPort, edge.readyValue, profEnv(settings.cpuProfDir, 'agent'));
    started.push(agent);
    const direct: LoadTarget = { origin: backend.readyValue, host: new URL(backend.readyValue).host };
    // The public host is the edge's name; the port is on the edge's loopback listener. The backend sees the
    // direct side's Host either way: the tunnel does not parse HTTP.
    const tunnel: LoadTarget = {
      origin: `http://127.0.0.1:${new URL(agent.readyValue).port}`,
      host: direct.host,
    };
    note(
      `backend ${backend.readyValue}, edge ${edge.readyValue} (--tcp-ports ${range}), tunnel ${agent.readyValue}`,
    );
    const stack: BenchStack = {
      backend,
      edge,
      agent,
      direct,
      tunnel,
      describe: () => ({
        backendUrl: backend.readyValue,
        edgeUrl: edge.readyValue,
        tunnelUrl: agent.readyValue,
      }),
      close: async () => {},
      kill: () => {},
    };
    const sides: Side[] = [
      { name: 'direct', target: direct },
      { name: 'tunnel', target: tunnel },
    ];
    const closedLoop: TcpLoadStage[] = [];
    let lastTick = -Infinity;
    const ticker =
      (label: string, totalSec: number) =>
      (tick: LoadTick): void => {
        if (tick.elapsedSec < lastTick) lastTick = -Infinity;
        if (tick.elapsedSec - lastTick < 5) return;
        lastTick = tick.elapsedSec;
        note(
          `${label}  ${tick.elapsedSec.toFixed(0)}/${totalSec} s  now ${fixed(tick.currentRps)} rps  ` +
            `done ${tick.finished}  errors ${tick.errors}  p99 ${fixed(tick.p99Ms, 2)} ms`,
        );
      };
    if (settings.warmupSec > 0) {
      for (const side of sides) {
        note(`${side.name}: warm-up ${settings.warmupSec} s closed loop (discarded)`);
        await runStage(
          stack,
          side,
          0,
          settings,
          settings.warmupSec,
          ticker(`warm-up ${side.name}`, settings.warmupSec),
        );
      }
    }
    for (let round = 1; round <= settings.rounds; round++) {
      for (const side of sides) {
        const label = `closed loop ${settings.connections} conn, ${side.name}, round ${round}/${settings.rounds}`;
        const stage = await runStage(
          stack,
          side,
          round,
          settings,
          settings.durationSec,
          ticker(label, settings.durationSec),
        );
        closedLoop.push(stage);
        note(stageLine(stage));
      }
    }
    const transfers =
      settings.bytes > 0
        ? (
            await runBulkBench(
              // The transfers run through this scenario's stack, which it closes itself afterwards.
              async () => ({ ...stack, close: async () => {} }),
              {
                bytes: settings.bytes,
                sides: ['direct', 'tunnel'],
                warmupBytes: settings.warmupBytes,
                cold: false,
              },
              note,
            )
          ).transfers
        : [];
    return {
      scenario: 'tcp',
      settings,
      stack: {
        backendUrl: backend.readyValue,
        edgeUrl: edge.readyValue,
        tcpUrl: agent.readyValue,
        tcpPortRange: range,
      },
      closedLoop,
      transfers,
      summary: summarizeTcp(closedLoop, transfers),
    };
  } finally {
    // Agent first, so the edge never sees a session vanish under load as an error.
    for (const service of started.reverse()) await service.stop();
  }
}
