import { mkdirSync } from 'node:fs';
import { type LoadTick, runLoad } from '../measure/load-runner.js';
import { meterProcess, meterSelf } from '../measure/process-stats.js';
import { fixed, median, ratioOf } from '../measure/report-format.js';
import { type SecondsRecord, secondsRecord } from '../measure/seconds-record.js';
import { perRequestUs } from '../measure/side-report.js';
import type { SideName } from '../plan/report-schema.js';
import {
  type BenchStack,
  jsonEvent,
  type LoadTarget,
  startBackendService,
  startEdgeService,
  tunnel2Bin,
} from '../stacks/bench-stack.js';
import { type ChildService, startChildService } from '../stacks/child-service.js';
import { type BulkTransfer, transfer } from './bulk-scenario.js';
import { startRelay } from './floor-scenario.js';

/*
 * `pnpm bench tcp`: a TCP tunnel (`tunnel2 tcp <backend port>` against `tunnel2 server --tcp-ports`) beside
 * the backend reached directly, in one run. The TCP tunnel carries the backend's HTTP as opaque bytes, so
 * the same HTTP load and the same bulk client measure both sides:
 * - closed loop at --connections (each autocannon connection is one public TCP connection, one stream):
 *   requests/s each side, their ratio, and the edge's + agent's CPU per request from /proc;
 * - one large download and one large upload each way (bulk-scenario.ts) with the edge's and the agent's RSS.
 * - the floor (unless `floor` is off): the bare relay pair of `pnpm bench floor` (relay-floor-process.ts, two
 *   Node.js processes multiplexing the client connections over one TCP connection, with bounded backpressure)
 *   measured the same way: what any Node.js tunnel of this shape reaches on this machine, in the same run.
 * Direct, floor and tunnel closed-loop stages alternate `rounds` times; the summary takes their medians. The
 * transfers alternate the sides too, direction by direction.
 */

/** direct, tunnel, and the floor relay. */
export type TcpSideName = SideName | 'floor';

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
  /** Measure the floor relay beside direct and the tunnel (`--no-floor`: false). Absent in older reports. */
  floor?: boolean;
  /** relay-floor-process.ts lever flags given to both halves of the floor (`--floor-flags`); [] by default. */
  floorFlags?: string[];
}

export interface TcpLoadStage extends SecondsRecord {
  side: TcpSideName;
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
  /** edge + agent: what the tunnel (or, on the floor side, the relay pair) adds. null on the direct side. */
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
  downloadMbps: { direct: number | null; tunnel: number | null; floor?: number | null };
  uploadMbps: { direct: number | null; tunnel: number | null; floor?: number | null };
  /** The floor side (absent in older reports; null when `--no-floor`): medians as the tunnel's. */
  floorRps?: number | null;
  floorCpuPerRequestUs?: number | null;
  /** tunnel ÷ direct, floor ÷ direct and tunnel ÷ floor, for the closed loop and each transfer. */
  ratios?: { rps: TcpRatios; download: TcpRatios; upload: TcpRatios };
}

export interface TcpRatios {
  tunnelOverDirect: number | null;
  floorOverDirect: number | null;
  tunnelOverFloor: number | null;
}

/** A transfer of `bulk`'s shape whose side may also be the floor. */
export type TcpTransfer = Omit<BulkTransfer, 'side'> & { side: TcpSideName };

export interface TcpResult {
  scenario: 'tcp';
  settings: TcpSettings;
  /** floorUrl: the floor relay's client-facing listener (absent without the floor). */
  stack: { backendUrl: string; edgeUrl: string; tcpUrl: string; tcpPortRange: string; floorUrl?: string };
  closedLoop: TcpLoadStage[];
  transfers: TcpTransfer[];
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

interface Side {
  name: TcpSideName;
  target: LoadTarget;
  /** The processes between the client and the backend, metered per stage (none on the direct side). */
  edge: ChildService | undefined;
  agent: ChildService | undefined;
}

async function runStage(
  stack: BenchStack,
  side: Side,
  round: number,
  settings: TcpSettings,
  durationSec: number,
  onTick: (tick: LoadTick) => void,
): Promise<TcpLoadStage> {
  const meters = [stack.backend, side.edge, side.agent].map((s) =>
    s === undefined ? undefined : meterProcess(s.pid),
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
    ...secondsRecord(load),
    backendCpuPerRequestUs: backend ?? null,
    edgeCpuPerRequestUs: edge ?? null,
    agentCpuPerRequestUs: agent ?? null,
    tunnelCpuPerRequestUs: edge != null && agent != null ? edge + agent : null,
    edgePeakRssMb: usages[1]?.peakRssMb ?? null,
    agentPeakRssMb: usages[2]?.peakRssMb ?? null,
    clientCpuPct,
  };
}

function ratios(values: { direct: number | null; tunnel: number | null; floor?: number | null }): TcpRatios {
  return {
    tunnelOverDirect: ratioOf(values.tunnel, values.direct),
    floorOverDirect: ratioOf(values.floor, values.direct),
    tunnelOverFloor: ratioOf(values.tunnel, values.floor),
  };
}

export function summarizeTcp(stages: TcpLoadStage[], transfers: TcpTransfer[]): TcpSummary {
  const of = (side: TcpSideName) => stages.filter((s) => s.side === side);
  const directRps = median(of('direct').map((s) => s.rps));
  const tunnelRps = median(of('tunnel').map((s) => s.rps));
  const floorRps = median(of('floor').map((s) => s.rps));
  const mbps = (direction: TcpTransfer['direction'], side: TcpSideName): number | null => {
    const t = transfers.find((x) => x.direction === direction && x.side === side);
    return t === undefined || t.error !== null ? null : t.mbPerSec;
  };
  const of3 = (direction: TcpTransfer['direction']) => ({
    direct: mbps(direction, 'direct'),
    tunnel: mbps(direction, 'tunnel'),
    floor: mbps(direction, 'floor'),
  });
  const downloadMbps = of3('download');
  const uploadMbps = of3('upload');
  return {
    directRps,
    tunnelRps,
    tunnelOverDirectRps: ratioOf(tunnelRps, directRps),
    tunnelCpuPerRequestUs: median(of('tunnel').flatMap((s) => s.tunnelCpuPerRequestUs ?? [])),
    downloadMbps,
    uploadMbps,
    floorRps,
    floorCpuPerRequestUs: median(of('floor').flatMap((s) => s.tunnelCpuPerRequestUs ?? [])),
    ratios: {
      rps: ratios({ direct: directRps, tunnel: tunnelRps, floor: floorRps }),
      download: ratios(downloadMbps),
      upload: ratios(uploadMbps),
    },
  };
}

function stageLine(stage: TcpLoadStage): string {
  return (
    `${stage.side} round ${stage.round}: ${fixed(stage.rps)} rps, ${stage.errors} errors, ` +
    `p99 ${fixed(stage.p99Ms, 2)} ms, load generator ${fixed(stage.clientCpuPct)} % CPU, ` +
    `backend ${fixed(stage.backendCpuPerRequestUs)} µs/req` +
    (stage.tunnelCpuPerRequestUs === null
      ? ''
      : `, ${stage.side} ${fixed(stage.tunnelCpuPerRequestUs)} µs/req (edge ${fixed(stage.edgeCpuPerRequestUs)} + ` +
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
    const floor =
      settings.floor === false
        ? undefined
        : await startRelay(backend.readyValue, started, settings.floorFlags);
    const direct: LoadTarget = { origin: backend.readyValue, host: new URL(backend.readyValue).host };
    // The public host is the edge's name; the port is on the edge's loopback listener. The backend sees the
    // direct side's Host either way: the tunnel does not parse HTTP.
    const tunnel: LoadTarget = {
      origin: `http://127.0.0.1:${new URL(agent.readyValue).port}`,
      host: direct.host,
    };
    note(
      `backend ${backend.readyValue}, edge ${edge.readyValue} (--tcp-ports ${range}), tunnel ${agent.readyValue}` +
        (floor === undefined ? '' : `, floor relay ${floor.edge.readyValue}`),
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
      { name: 'direct', target: direct, edge: undefined, agent: undefined },
      ...(floor === undefined
        ? []
        : [
            {
              name: 'floor' as const,
              // The relay passes bytes untouched; the backend sees the direct side's Host.
              target: { origin: floor.edge.readyValue, host: direct.host },
              edge: floor.edge,
              agent: floor.agent,
            },
          ]),
      { name: 'tunnel', target: tunnel, edge, agent },
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
    const transfers: TcpTransfer[] = [];
    for (const direction of settings.bytes > 0 ? (['download', 'upload'] as const) : []) {
      for (const side of sides) {
        // The floor is measured as the 'tunnel' of a view of the stack whose edge and agent are the relay's.
        const view: BenchStack =
          side.name === 'floor'
            ? { ...stack, edge: side.edge, agent: side.agent, tunnel: side.target }
            : stack;
        const measured = await transfer(
          view,
          { bytes: settings.bytes, warmupBytes: settings.warmupBytes, cold: false },
          direction,
          side.name === 'direct' ? 'direct' : 'tunnel',
          note,
          side.name,
        );
        transfers.push({ ...measured, side: side.name });
      }
    }
    return {
      scenario: 'tcp',
      settings,
      stack: {
        backendUrl: backend.readyValue,
        edgeUrl: edge.readyValue,
        tcpUrl: agent.readyValue,
        tcpPortRange: range,
        ...(floor === undefined ? {} : { floorUrl: floor.edge.readyValue }),
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
