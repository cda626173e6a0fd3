import { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from './support/cluster-harness.js';
import { type CountingBackend, startCountingBackend } from './support/counting-backend.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { MAX_OUTSTANDING, type Outcome, rate, requestOnce, steadyLoad } from './support/replica-load.js';

// Replicas across a cluster as an operator runs one: three `tunnel2 server` nodes on a real redis-server,
// HAProxy round-robin in front, and three agent processes (`tunnel2 http … --replica`) of one token, each
// connected to a different node and in front of its own backend. Public requests come through HAProxy at
// ~500/s (bounded: at most MAX_OUTSTANDING at once, each phase a few seconds): how they spread, and what a
// SIGTERM, a kill -9 and a rolling restart of the agents cost.

const NAME = 'shop';
const TOKEN = 'token-a';
const BOUND = { timeoutMs: 30_000 };

let cluster: Cluster;
const backends: CountingBackend[] = [];
/** The agent in front of backends[i], connected to cluster.nodes[i]. */
const agents: Spawned[] = [];
const keepAlive = new Agent({ keepAlive: true, maxSockets: MAX_OUTSTANDING });

function startAgent(i: number): Spawned {
  const agent = spawnCli([
    'http',
    String(backends[i]!.port),
    '--json',
    '--no-inspect',
    '--token',
    TOKEN,
    '--server',
    `http://127.0.0.1:${cluster.nodes[i]!.port}`,
    '--subdomain',
    NAME,
    '--replica',
  ]);
  agents[i] = agent;
  return agent;
}

beforeAll(async () => {
  cluster = await startCluster({ nodes: 3, edgeArgs: ['--token', TOKEN] });
  for (const id of ['r0', 'r1', 'r2']) backends.push(await startCountingBackend(id));
  for (let i = 0; i < 3; i++) {
    const agent = startAgent(i);
    await agent.waitFor('ready').catch((err: unknown) => {
      throw new Error(`agent ${i}: ${String(err)} ${JSON.stringify(agent.events)}`);
    });
  }
}, 60_000);

afterAll(async () => {
  for (const agent of agents) agent?.kill('SIGKILL');
  await Promise.all(agents.map((agent) => agent?.exited));
  keepAlive.destroy();
  await cluster?.stop();
  await Promise.all(backends.map((backend) => backend.close()));
});

function request(): Promise<Outcome> {
  return requestOnce(cluster.lbPort, `${NAME}.localhost`, keepAlive);
}

/** Agent sessions connected to node `i`, as its /metrics says. */
async function sessionsOn(i: number): Promise<number> {
  const res = await send({ port: cluster.nodes[i]!.adminPort, path: '/metrics' });
  const line = /^tunnel2_sessions_connected(?:\{[^}]*\})? (\d+)/m.exec(res.body.toString());
  return Number(line?.[1] ?? Number.NaN);
}

/** Requests this cluster's nodes carried to another node so far (every outcome), as their /metrics say. */
async function forwardedTotal(): Promise<number> {
  let total = 0;
  for (const node of cluster.nodes) {
    const res = await send({ port: node.adminPort, path: '/metrics' });
    for (const line of res.body.toString().split('\n'))
      if (line.startsWith('tunnel2_cluster_forwarded_total{'))
        total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** Every backend answers through HAProxy (every node's replica is live and chosen). */
async function allThreeServe(): Promise<void> {
  const seen = new Set<string>();
  const deadline = performance.now() + BOUND.timeoutMs;
  while (seen.size < 3) {
    if (performance.now() > deadline) throw new Error(`only ${[...seen].join(', ')} answered`);
    seen.add((await request()).answer);
  }
}

describe('three replicas on three nodes behind HAProxy, one Redis, ~500 requests/s', () => {
  it('each node holds one replica; the requests spread over all three: each backend serves at least 20 %', async () => {
    for (let i = 0; i < 3; i++) expect(await sessionsOn(i)).toBe(1);
    await allThreeServe();
    const before = backends.map((backend) => backend.requests);
    const crossedBefore = await forwardedTotal();
    const load = steadyLoad(request, BOUND);
    await load.more(1_000);
    const outcomes = await load.stop();
    const served = backends.map((backend, i) => backend.requests - (before[i] ?? 0));
    const total = served.reduce((a, b) => a + b, 0);
    const crossed = (await forwardedTotal()) - crossedBefore;
    console.info(
      `spread: ${outcomes.length} requests at ~${rate(outcomes)}/s, served ${served.join('/')}, ` +
        `${crossed} carried to another node`,
    );
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    for (const count of served) expect(count / total).toBeGreaterThanOrEqual(0.2);
  }, 90_000);

  it('one agent SIGTERMed: not one request fails; the others take the new ones', async () => {
    await allThreeServe();
    const load = steadyLoad(request, BOUND);
    await load.more(300);
    const leaving = agents[0]!;
    leaving.kill('SIGTERM');
    expect(await leaving.exited).toBe(0);
    const goneAt = performance.now();
    await load.more(500);
    const outcomes = await load.stop();
    console.info(`SIGTERM: ${outcomes.length} requests at ~${rate(outcomes)}/s`);
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    expect(outcomes.filter((o) => o.startedAt > goneAt && o.answer === 'r0')).toEqual([]);
    await startAgent(0).waitFor('ready');
  }, 90_000);

  it('one agent killed with SIGKILL: only requests in flight on it fail, each with a clean 502', async () => {
    await allThreeServe();
    const load = steadyLoad(request, BOUND);
    await load.more(300);
    const killedAt = performance.now();
    agents[1]!.kill('SIGKILL');
    await agents[1]!.exited;
    // Its node sees the WebSocket go (the kernel closes it with the process).
    for (;;) {
      if ((await sessionsOn(1)) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const goneAt = performance.now();
    await load.more(500);
    const outcomes = await load.stop();
    const failed = outcomes.filter((o) => !o.ok);
    console.info(
      `SIGKILL: ${outcomes.length} requests at ~${rate(outcomes)}/s, ${failed.length} failed ` +
        `(${[...new Set(failed.map((o) => o.answer))].join(', ')}); its node saw it gone after ` +
        `${Math.round(goneAt - killedAt)} ms`,
    );
    for (const o of failed) {
      expect(o.answer).toMatch(/^502 TUNNEL2_ERR_/);
      expect(o.startedAt).toBeLessThanOrEqual(goneAt);
      expect(o.endedAt).toBeGreaterThanOrEqual(killedAt);
    }
    expect(outcomes.filter((o) => o.startedAt > goneAt && !o.ok)).toEqual([]);
    expect(outcomes.filter((o) => o.startedAt > goneAt && o.answer === 'r1')).toEqual([]);
    await startAgent(1).waitFor('ready');
  }, 90_000);

  it('a rolling restart of all three agents (SIGTERM, start again on its node, next) loses nothing', async () => {
    await allThreeServe();
    const load = steadyLoad(request, BOUND);
    await load.more(200);
    for (let i = 0; i < 3; i++) {
      const old = agents[i]!;
      old.kill('SIGTERM');
      expect(await old.exited).toBe(0);
      await startAgent(i).waitFor('ready');
      await load.more(200);
    }
    const outcomes = await load.stop();
    console.info(`rolling restart: ${outcomes.length} requests at ~${rate(outcomes)}/s`);
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    await allThreeServe();
  }, 120_000);
});
