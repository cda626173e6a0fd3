import { request } from 'node:http';
import { type LoadResult, runLoad } from '../measure/load-runner.js';
import { meterProcess } from '../measure/process-stats.js';
import { fixed } from '../measure/report-format.js';
import { type SecondsRecord, secondsRecord } from '../measure/seconds-record.js';
import { perRequestUs } from '../measure/side-report.js';
import { autoConnections } from '../plan/scenarios.js';
import { type ClusterNode, type ClusterStack, startClusterStack } from '../stacks/cluster-stack.js';

/*
 * `pnpm bench cluster` (issue #14 part 6): three nodes + Redis + HAProxy, one agent connected through HAProxy.
 * 1. Latency and CPU at fixed rates: the same requests sent straight to the node that holds the session
 *    (same-node) and to another node (cross-node, one node-to-node hop); `x-tunnel2-node` names the holder.
 * 2. Rolling restart: SIGTERM, wait, start again, node after node, under a steady load through HAProxy.
 * 3. kill -9 of the holder under the same load: failures counted by kind, and how long until the session
 *    answers again from another node.
 * The restart and kill phases count failures honestly; the gate reports the issue's targets.
 */

export interface ClusterSettings {
  rates: number[];
  durationSec: number;
  warmupSec: number;
  /** The steady rate during the rolling restart and the kill. */
  faultRate: number;
  /** Load kept between two restarts, so each node's agents settle (seconds). */
  settleSec: number;
  path: string;
}

export interface ClusterLatencyStage extends SecondsRecord {
  route: 'same-node' | 'cross-node';
  targetRps: number;
  requests: number;
  ok: number;
  errors: Record<string, number>;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU µs per answered request, per process; `nodes` is every edge node's sum. */
  cpuPerRequestUs: {
    ingress: number | null;
    holder: number | null;
    nodes: number | null;
    agent: number | null;
    backend: number | null;
  };
}

export interface ClusterFaultPhase extends SecondsRecord {
  kind: 'rolling-restart' | 'kill';
  targetRps: number;
  requests: number;
  ok: number;
  failed: number;
  errors: Record<string, number>;
  p99Ms: number;
  /** What was done, in order, with its time from the phase's start. */
  events: string[];
  /** kill: ms from the kill until the session answered 2xx again from another node; null if it did not. */
  recoveredAfterMs: number | null;
}

export interface ClusterResult {
  scenario: 'cluster';
  settings: ClusterSettings;
  latency: ClusterLatencyStage[];
  faults: ClusterFaultPhase[];
}

interface Probe {
  status: number;
  node: string | null;
}

/** One GET straight to a node: the status and the node that served it (`x-tunnel2-node`). */
function probe(port: number, host: string, path: string): Promise<Probe> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path, headers: { host }, agent: false, timeout: 2_000 },
      (res) => {
        res.resume();
        res.once('end', () => {
          const node = res.headers['x-tunnel2-node'];
          resolve({ status: res.statusCode ?? 0, node: typeof node === 'string' ? node : null });
        });
        res.once('error', () => resolve({ status: 0, node: null }));
      },
    );
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve({ status: 0, node: null }));
    req.end();
  });
}

const PROBE_PAUSE_MS = 50;

/** Polls a node until the session answers 2xx from a node other than `not` (bounded); the serving node. */
async function waitServed(
  stack: ClusterStack,
  via: ClusterNode,
  path: string,
  not: string | null,
  limitMs: number,
): Promise<string | null> {
  const deadline = performance.now() + limitMs;
  while (performance.now() < deadline) {
    const got = await probe(via.port, stack.host, path);
    if (got.status >= 200 && got.status < 300 && got.node !== null && got.node !== not) return got.node;
    await new Promise((resolve) => setTimeout(resolve, PROBE_PAUSE_MS));
  }
  return null;
}

function holderOf(stack: ClusterStack, id: string | null): ClusterNode {
  const node = stack.nodes.find((n) => n.id === id);
  if (node === undefined) throw new Error(`no node answered for the session (holder ${id ?? 'unknown'})`);
  return node;
}

async function latencyStage(
  stack: ClusterStack,
  settings: ClusterSettings,
  route: ClusterLatencyStage['route'],
  rate: number,
  durationSec: number,
): Promise<ClusterLatencyStage> {
  const holder = holderOf(stack, await waitServed(stack, stack.nodes[0]!, settings.path, null, 10_000));
  const ingress = route === 'same-node' ? holder : stack.nodes.find((n) => n !== holder)!;
  const meters = {
    nodes: stack.nodes.map((n) => ({ node: n, meter: meterProcess(n.service.pid) })),
    agent: meterProcess(stack.agent.pid),
    backend: meterProcess(stack.backend.pid),
  };
  const load = await runLoad({
    target: stack.nodeTarget(ingress),
    path: settings.path,
    connections: autoConnections(rate),
    durationSec,
    ratePerSec: rate,
    timeoutSec: 10,
  });
  const { ok } = load.outcomes;
  const cpu = meters.nodes.map(({ node, meter }) => ({ node, cpuMs: meter?.stop()?.cpuMs }));
  const cpuOf = (node: ClusterNode): number | null =>
    perRequestUs(cpu.find((c) => c.node === node)?.cpuMs, ok);
  const allKnown = cpu.every((c) => c.cpuMs !== undefined);
  return {
    route,
    targetRps: rate,
    requests: load.outcomes.finished,
    ok,
    errors: { ...load.outcomes.errors } as Record<string, number>,
    rps: ok / load.durationSec,
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    ...secondsRecord(load),
    cpuPerRequestUs: {
      ingress: cpuOf(ingress),
      holder: cpuOf(holder),
      nodes: allKnown
        ? perRequestUs(
            cpu.reduce((s, c) => s + (c.cpuMs ?? 0), 0),
            ok,
          )
        : null,
      agent: perRequestUs(meters.agent?.stop()?.cpuMs, ok),
      backend: perRequestUs(meters.backend?.stop()?.cpuMs, ok),
    },
  };
}

/** Runs load through HAProxy for `durationSec` while `act` runs; `act` logs events against the phase clock. */
async function faultPhase(
  stack: ClusterStack,
  settings: ClusterSettings,
  kind: ClusterFaultPhase['kind'],
  durationSec: number,
  act: (log: (event: string) => void) => Promise<number | null>,
): Promise<ClusterFaultPhase> {
  const events: string[] = [];
  const t0 = performance.now();
  const log = (event: string): void => {
    events.push(`${((performance.now() - t0) / 1000).toFixed(2)} s: ${event}`);
  };
  const loading = runLoad({
    target: stack.lb,
    path: settings.path,
    connections: autoConnections(settings.faultRate),
    durationSec,
    ratePerSec: settings.faultRate,
    timeoutSec: 10,
  });
  const [load, recoveredAfterMs] = await Promise.all([loading, act(log)]);
  return summarizeFault(kind, settings.faultRate, load, events, recoveredAfterMs);
}

function summarizeFault(
  kind: ClusterFaultPhase['kind'],
  rate: number,
  load: LoadResult,
  events: string[],
  recoveredAfterMs: number | null,
): ClusterFaultPhase {
  const { outcomes } = load;
  return {
    kind,
    targetRps: rate,
    requests: outcomes.finished,
    ok: outcomes.ok,
    failed: outcomes.errorCount(),
    errors: { ...outcomes.errors } as Record<string, number>,
    p99Ms: load.latency.p99,
    ...secondsRecord(load),
    events,
    recoveredAfterMs,
  };
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function runClusterBench(
  settings: ClusterSettings,
  note: (line: string) => void,
): Promise<ClusterResult> {
  let stack: ClusterStack | undefined;
  const onExit = (): void => stack?.kill();
  process.once('exit', onExit);
  try {
    stack = await startClusterStack(3, 'cluster');
    const s = stack;
    note(
      `cluster up: ${s.nodes.map((n) => `${n.id} :${n.port}`).join(', ')}, lb ${s.lb.origin}, tunnel ${s.host}`,
    );
    const latency: ClusterLatencyStage[] = [];
    for (const rate of settings.rates) {
      for (const route of ['same-node', 'cross-node'] as const) {
        if (settings.warmupSec > 0) await latencyStage(s, settings, route, rate, settings.warmupSec);
        const stage = await latencyStage(s, settings, route, rate, settings.durationSec);
        latency.push(stage);
        const c = stage.cpuPerRequestUs;
        note(
          `${route} ${rate} RPS: ${fixed(stage.rps)} rps, ${stage.requests - stage.ok} failed, p50 ${fixed(stage.p50Ms, 2)} ms, ` +
            `p99 ${fixed(stage.p99Ms, 2)} ms, CPU µs/req: nodes ${fixed(c.nodes)} (ingress ${fixed(c.ingress)}, holder ${fixed(c.holder)}), ` +
            `agent ${fixed(c.agent)}, backend ${fixed(c.backend)}`,
        );
      }
    }

    const faults: ClusterFaultPhase[] = [];
    const restartSec = s.nodes.length * (settings.settleSec + 2) + settings.settleSec;
    note(
      `rolling restart of ${s.nodes.length} nodes under ${settings.faultRate} RPS (about ${restartSec} s)`,
    );
    const restart = await faultPhase(s, settings, 'rolling-restart', restartSec, async (log) => {
      await pause(settings.settleSec * 1000);
      for (const node of s.nodes) {
        log(`SIGTERM ${node.id}`);
        await node.restart();
        log(`${node.id} listening again`);
        await pause(settings.settleSec * 1000);
      }
      return null;
    });
    faults.push(restart);
    note(
      `rolling restart: ${restart.failed} of ${restart.requests} failed ${JSON.stringify(restart.errors)}`,
    );

    const before = await waitServed(s, s.nodes[0]!, settings.path, null, 10_000);
    const victim = holderOf(s, before);
    const survivor = s.nodes.find((n) => n !== victim)!;
    const killSec = 2 * settings.settleSec + 5;
    note(`kill -9 of ${victim.id} (the holder) under ${settings.faultRate} RPS (about ${killSec} s)`);
    const kill = await faultPhase(s, settings, 'kill', killSec, async (log) => {
      await pause(settings.settleSec * 1000);
      log(`kill -9 ${victim.id}`);
      const at = performance.now();
      victim.kill();
      const back = await waitServed(s, survivor, settings.path, victim.id, 5_000 + settings.settleSec * 1000);
      const after = back === null ? null : Math.round(performance.now() - at);
      log(back === null ? 'the session did not answer again' : `served again by ${back}`);
      return after;
    });
    faults.push(kill);
    note(
      `kill: ${kill.failed} of ${kill.requests} failed ${JSON.stringify(kill.errors)}, ` +
        `session back after ${kill.recoveredAfterMs ?? 'never'} ms`,
    );
    return { scenario: 'cluster', settings, latency, faults };
  } finally {
    await stack?.close();
    process.off('exit', onExit);
  }
}
