import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from '../measure/load-runner.js';
import { meterProcess } from '../measure/process-stats.js';
import { fixed, ratioOf } from '../measure/report-format.js';
import { type SecondsRecord, secondsRecord } from '../measure/seconds-record.js';
import { perRequestUs } from '../measure/side-report.js';
import { autoConnections } from '../plan/scenarios.js';
import {
  type BenchStack,
  jsonEvent,
  type LoadTarget,
  startBenchStack,
  targetOf,
} from '../stacks/bench-stack.js';
import { type ChildService, startChildService } from '../stacks/child-service.js';

/*
 * `pnpm bench floor`: what the tunnel costs next to the least any Node.js tunnel of its shape can cost on the
 * same machine, in one run. Four sides answer the same requests from the same backend process:
 * - direct: the backend alone;
 * - relay: two Node.js processes that multiplex the client connections over one TCP connection and copy
 *   bytes, with no HTTP, no flow control, no limits (relay-floor-process.ts): the byte floor;
 * - http-relay: the same two processes' shape, HTTP-aware: a node:http server on one side, an undici Pool on
 *   the other, heads and body chunks framed between them and nothing else (http-relay-floor-process.ts):
 *   the HTTP floor, what any tunnel that parses requests and calls its backend over HTTP pays at least;
 * - tunnel: tunnel2's edge and agent, from their real command lines.
 * Each side runs a fixed-rate stage (CPU per request where every request wakes every process) and a
 * closed-loop stage (throughput when requests share wake-ups).
 */

export type FloorSideName = 'direct' | 'relay' | 'http-relay' | 'tunnel';

export interface FloorSettings {
  ratePerSec: number;
  connections: number;
  durationSec: number;
  warmupSec: number;
  path: string;
}

export interface FloorStage extends SecondsRecord {
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
  /** The HTTP floor at the fixed rate: edge + agent CPU per request, and the ratios it makes. */
  httpRelayCpuPerRequestUs: number | null;
  tunnelOverHttpRelayCpu: number | null;
  httpRelayOverRelayCpu: number | null;
  /** Closed loop: edge + agent CPU per request of each side, and the same ratios. */
  relayClosedCpuPerRequestUs: number | null;
  httpRelayClosedCpuPerRequestUs: number | null;
  tunnelClosedCpuPerRequestUs: number | null;
  tunnelOverRelayClosedCpu: number | null;
  tunnelOverHttpRelayClosedCpu: number | null;
  httpRelayOverRelayClosedCpu: number | null;
  /** Closed-loop throughput: the HTTP floor over direct and over the byte floor, and the tunnel over each floor. */
  httpRelayOverDirectRps: number | null;
  httpRelayOverRelayRps: number | null;
  tunnelOverRelayRps: number | null;
  tunnelOverHttpRelayRps: number | null;
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

const binOf = (file: string): string => join(fileURLToPath(new URL('../processes/', import.meta.url)), file);

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
  name = 'relay',
  file = 'relay-floor-process.js',
): Promise<{ edge: ChildService; agent: ChildService }> {
  const agent = await startChildService({
    name: `${name} agent (floor)`,
    args: [binOf(file), '--role', 'agent', '--backend', backendUrl, ...leverArgs],
    ready: listeningUrl,
  });
  started.push(agent);
  const edge = await startChildService({
    name: `${name} edge (floor)`,
    args: [binOf(file), '--role', 'edge', '--upstream', agent.readyValue, ...leverArgs],
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
    ...secondsRecord(load),
    backendCpuPerRequestUs: backend ?? Number.NaN,
    edgeCpuPerRequestUs: edge ?? null,
    agentCpuPerRequestUs: agent ?? null,
    betweenCpuPerRequestUs: edge != null && agent != null ? edge + agent : null,
  };
}

function summarize(stages: FloorStage[]): FloorSummary {
  const find = (side: FloorSideName, mode: FloorStage['mode']) =>
    stages.find((s) => s.side === side && s.mode === mode);
  const cpu = (side: FloorSideName, mode: FloorStage['mode']) =>
    find(side, mode)?.betweenCpuPerRequestUs ?? null;
  const rps = (side: FloorSideName) => find(side, 'closed')?.rps;
  const [relayCpu, httpRelayCpu, tunnelCpu] = (['relay', 'http-relay', 'tunnel'] as const).map((side) =>
    cpu(side, 'rate'),
  );
  const [relayClosed, httpRelayClosed, tunnelClosed] = (['relay', 'http-relay', 'tunnel'] as const).map(
    (side) => cpu(side, 'closed'),
  );
  return {
    relayCpuPerRequestUs: relayCpu ?? null,
    tunnelCpuPerRequestUs: tunnelCpu ?? null,
    tunnelOverRelayCpu: ratioOf(tunnelCpu, relayCpu),
    relayOverDirectRps: ratioOf(rps('relay'), rps('direct')),
    tunnelOverDirectRps: ratioOf(rps('tunnel'), rps('direct')),
    httpRelayCpuPerRequestUs: httpRelayCpu ?? null,
    tunnelOverHttpRelayCpu: ratioOf(tunnelCpu, httpRelayCpu),
    httpRelayOverRelayCpu: ratioOf(httpRelayCpu, relayCpu),
    relayClosedCpuPerRequestUs: relayClosed ?? null,
    httpRelayClosedCpuPerRequestUs: httpRelayClosed ?? null,
    tunnelClosedCpuPerRequestUs: tunnelClosed ?? null,
    tunnelOverRelayClosedCpu: ratioOf(tunnelClosed, relayClosed),
    tunnelOverHttpRelayClosedCpu: ratioOf(tunnelClosed, httpRelayClosed),
    httpRelayOverRelayClosedCpu: ratioOf(httpRelayClosed, relayClosed),
    httpRelayOverDirectRps: ratioOf(rps('http-relay'), rps('direct')),
    httpRelayOverRelayRps: ratioOf(rps('http-relay'), rps('relay')),
    tunnelOverRelayRps: ratioOf(rps('tunnel'), rps('relay')),
    tunnelOverHttpRelayRps: ratioOf(rps('tunnel'), rps('http-relay')),
  };
}

/** The three floors side by side, as the report's summary and the run's last lines on stderr say them. */
export function summaryLines(summary: FloorSummary, settings: FloorSettings): string[] {
  const us = (n: number | null): string => (n === null ? '–' : `${fixed(n)} µs`);
  const x = (n: number | null): string => (n === null ? '–' : `${fixed(n, 2)}×`);
  const s = summary;
  return [
    `at ${settings.ratePerSec} RPS, edge + agent CPU per request: byte floor ${us(s.relayCpuPerRequestUs)}, ` +
      `HTTP floor ${us(s.httpRelayCpuPerRequestUs)}, tunnel ${us(s.tunnelCpuPerRequestUs)}; ` +
      `tunnel / floor = ${x(s.tunnelOverRelayCpu)}, tunnel / HTTP floor = ${x(s.tunnelOverHttpRelayCpu)}, ` +
      `HTTP floor / byte floor = ${x(s.httpRelayOverRelayCpu)}`,
    `closed loop, ${settings.connections} connections, edge + agent CPU per request: byte floor ` +
      `${us(s.relayClosedCpuPerRequestUs)}, HTTP floor ${us(s.httpRelayClosedCpuPerRequestUs)}, tunnel ` +
      `${us(s.tunnelClosedCpuPerRequestUs)}; tunnel / floor = ${x(s.tunnelOverRelayClosedCpu)}, tunnel / HTTP ` +
      `floor = ${x(s.tunnelOverHttpRelayClosedCpu)}, HTTP floor / byte floor = ${x(s.httpRelayOverRelayClosedCpu)}`,
    `closed-loop throughput: relay / direct = ${x(s.relayOverDirectRps)}, http-relay / direct = ` +
      `${x(s.httpRelayOverDirectRps)}, tunnel / direct = ${x(s.tunnelOverDirectRps)}; tunnel / floor = ` +
      `${x(s.tunnelOverRelayRps)}, tunnel / HTTP floor = ${x(s.tunnelOverHttpRelayRps)}, HTTP floor / byte ` +
      `floor = ${x(s.httpRelayOverRelayRps)}`,
  ];
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
    const httpRelay = await startRelay(
      stack.backend.readyValue,
      started,
      [],
      'http relay',
      'http-relay-floor-process.js',
    );
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
      // The HTTP floor passes the client's Host through too (tunnel2 rewrites it to the backend's).
      {
        name: 'http-relay',
        target: { ...targetOf(httpRelay.edge.readyValue), host: stack.direct.host },
        edge: httpRelay.edge,
        agent: httpRelay.agent,
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
    const summary = summarize(stages);
    for (const line of summaryLines(summary, settings)) note(line);
    return { scenario: 'floor', settings, stages, summary };
  } finally {
    for (const service of started.reverse()) await service.stop();
    await stack?.close();
  }
}
