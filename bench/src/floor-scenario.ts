import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchStack, jsonEvent, type LoadTarget, startBenchStack, targetOf } from './bench-stack.js';
import { type ChildService, startChildService } from './child-service.js';
import { runLoad } from './load-runner.js';
import { meterProcess } from './process-stats.js';
import { fixed } from './report-format.js';
import { autoConnections } from './scenarios.js';
import { perRequestUs } from './side-report.js';

/*
 * `pnpm bench floor`: what the tunnel costs next to the least any Node.js tunnel of its shape can cost on the
 * same machine, in one run. Three sides answer the same requests from the same backend process:
 * - direct: the backend alone;
 * - relay: two Node.js processes that multiplex the client connections over one TCP connection and copy
 *   bytes, with no HTTP, no flow control, no limits (relay-floor-process.ts): the floor;
 * - tunnel: tunnel2's edge and agent, from their real command lines.
 * Each side runs a fixed-rate stage (CPU per request where every request wakes every process) and a
 * closed-loop stage (throughput when requests share wake-ups).
 */

export type FloorSideName = 'direct' | 'relay' | 'tunnel';

export interface FloorSettings {
  ratePerSec: number;
  connections: number;
  durationSec: number;
  warmupSec: number;
  path: string;
}

export interface FloorStage {
  side: FloorSideName;
  mode: 'rate' | 'closed';
  targetRps: number | null;
  connections: number;
  durationSec: number;
  requests: number;
  ok: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU (user + system) per answered request, µs; 10 ms clock ticks, so short stages are coarse. */
  backendCpuPerRequestUs: number;
  /** The edge-like process (relay edge or tunnel2 edge); null for direct. */
  edgeCpuPerRequestUs: number | null;
  agentCpuPerRequestUs: number | null;
  /** edge + agent: what the side adds between the client and the backend. */
  betweenCpuPerRequestUs: number | null;
}

export interface FloorSummary {
  /** At the fixed rate: edge + agent CPU per request. */
  relayCpuPerRequestUs: number | null;
  tunnelCpuPerRequestUs: number | null;
  /** tunnel / relay at the fixed rate. */
  tunnelOverRelayCpu: number | null;
  /** Closed loop: each side's throughput over direct's. */
  relayOverDirectRps: number | null;
  tunnelOverDirectRps: number | null;
}

export interface FloorResult {
  scenario: 'floor';
  settings: FloorSettings;
  stages: FloorStage[];
  summary: FloorSummary;
}

interface Side {
  name: FloorSideName;
  target: LoadTarget;
  edge: ChildService | undefined;
  agent: ChildService | undefined;
}

const relayBin = (): string => join(fileURLToPath(new URL('.', import.meta.url)), 'relay-floor-process.js');

function listeningUrl(line: string): string | undefined {
  const url = jsonEvent(line, 'listening')?.url;
  return typeof url === 'string' ? url : undefined;
}

/**
 * The relay pair in front of `backendUrl`, pushed on `started` as each is up (so the caller stops them);
 * `leverArgs` (relay-floor-process.ts's lever flags) go to both halves.
 */
export async function startRelay(
  backendUrl: string,
  started: ChildService[],
  leverArgs: string[] = [],
): Promise<{ edge: ChildService; agent: ChildService }> {
  const agent = await startChildService({
    name: 'relay agent (floor)',
    args: [relayBin(), '--role', 'agent', '--backend', backendUrl, ...leverArgs],
    ready: listeningUrl,
  });
  started.push(agent);
  const edge = await startChildService({
    name: 'relay edge (floor)',
    args: [relayBin(), '--role', 'edge', '--upstream', agent.readyValue, ...leverArgs],
    ready: listeningUrl,
  });
  started.push(edge);
  return { edge, agent };
}

async function runStage(
  stack: BenchStack,
  side: Side,
  settings: FloorSettings,
  mode: FloorStage['mode'],
  durationSec: number,
): Promise<FloorStage> {
  const connections = mode === 'rate' ? autoConnections(settings.ratePerSec) : settings.connections;
  const meters = [stack.backend, side.edge, side.agent].map((s) => (s ? meterProcess(s.pid) : undefined));
  const load = await runLoad({
    target: side.target,
    path: settings.path,
    connections,
    durationSec,
    ratePerSec: mode === 'rate' ? settings.ratePerSec : undefined,
    timeoutSec: 10,
  });
  const { ok, finished } = load.outcomes;
  const [backend, edge, agent] = meters.map((m) => perRequestUs(m?.stop()?.cpuMs, ok));
  return {
    side: side.name,
    mode,
    targetRps: mode === 'rate' ? settings.ratePerSec : null,
    connections,
    durationSec: load.durationSec,
    requests: finished,
    ok,
    errors: load.outcomes.errorCount(),
    rps: ok / load.durationSec,
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    backendCpuPerRequestUs: backend ?? Number.NaN,
    edgeCpuPerRequestUs: edge ?? null,
    agentCpuPerRequestUs: agent ?? null,
    betweenCpuPerRequestUs: edge != null && agent != null ? edge + agent : null,
  };
}

function summarize(stages: FloorStage[]): FloorSummary {
  const find = (side: FloorSideName, mode: FloorStage['mode']) =>
    stages.find((s) => s.side === side && s.mode === mode);
  const ratio = (a: number | null | undefined, b: number | null | undefined): number | null =>
    a != null && b != null && b > 0 ? a / b : null;
  const relayCpu = find('relay', 'rate')?.betweenCpuPerRequestUs ?? null;
  const tunnelCpu = find('tunnel', 'rate')?.betweenCpuPerRequestUs ?? null;
  const directRps = find('direct', 'closed')?.rps;
  return {
    relayCpuPerRequestUs: relayCpu,
    tunnelCpuPerRequestUs: tunnelCpu,
    tunnelOverRelayCpu: ratio(tunnelCpu, relayCpu),
    relayOverDirectRps: ratio(find('relay', 'closed')?.rps, directRps),
    tunnelOverDirectRps: ratio(find('tunnel', 'closed')?.rps, directRps),
  };
}

export async function runFloorBench(
  settings: FloorSettings,
  note: (line: string) => void,
): Promise<FloorResult> {
  const started: ChildService[] = [];
  let stack: BenchStack | undefined;
  try {
    stack = await startBenchStack({ tunnel: true, subdomain: 'floor' });
    const relay = await startRelay(stack.backend.readyValue, started);
    if (stack.tunnel === undefined) throw new Error('the tunnel side did not start');
    const sides: Side[] = [
      { name: 'direct', target: stack.direct, edge: undefined, agent: undefined },
      // The backend ignores Host; the relay passes the direct side's through untouched.
      {
        name: 'relay',
        target: { ...targetOf(relay.edge.readyValue), host: stack.direct.host },
        edge: relay.edge,
        agent: relay.agent,
      },
      { name: 'tunnel', target: stack.tunnel, edge: stack.edge, agent: stack.agent },
    ];
    const stages: FloorStage[] = [];
    for (const side of sides) {
      if (settings.warmupSec > 0) {
        note(`${side.name}: warm-up ${settings.warmupSec} s closed loop (discarded)`);
        await runStage(stack, side, settings, 'closed', settings.warmupSec);
      }
      for (const mode of ['rate', 'closed'] as const) {
        const stage = await runStage(stack, side, settings, mode, settings.durationSec);
        stages.push(stage);
        note(
          `${side.name} ${mode === 'rate' ? `${settings.ratePerSec} RPS` : `closed loop, ${stage.connections} connections`}: ` +
            `${fixed(stage.rps)} rps, ${stage.errors} errors, p99 ${fixed(stage.p99Ms, 2)} ms, CPU µs/req: ` +
            `backend ${fixed(stage.backendCpuPerRequestUs)}` +
            (stage.betweenCpuPerRequestUs === null
              ? ''
              : `, ${side.name} ${fixed(stage.betweenCpuPerRequestUs)} (edge ${fixed(stage.edgeCpuPerRequestUs)} + agent ${fixed(stage.agentCpuPerRequestUs)})`),
        );
      }
    }
    return { scenario: 'floor', settings, stages, summary: summarize(stages) };
  } finally {
    for (const service of started.reverse()) await service.stop();
    await stack?.close();
  }
}
