import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type ClusterNode, startCluster } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';

// Faults with every part real: Redis stopped and restarted under three edge processes behind HAProxy,
// and the same agent token reconnecting on another node. Leases are short (1.5 s, renewed every 0.5 s)
// so a lease outlives its TTL within the test.

const LEASE_TTL_MS = 1_500;
/** Bound on every "until" loop below: far above the lease and backoff periods involved. */
const DEADLINE_MS = 20_000;

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

let cluster: Cluster;
let backend: Backend;
const agents: Spawned[] = [];

beforeAll(async () => {
  cluster = await startCluster({
    nodes: 3,
    edgeArgs: [
      '--lease-ttl-ms',
      String(LEASE_TTL_MS),
      ...['token-a', 'token-b', 'token-c'].flatMap((t) => ['--token', t]),
    ],
  });
  backend = await createTestBackend();
}, 30_000);

afterAll(async () => {
  for (const agent of agents) {
    agent.kill('SIGKILL');
    await agent.exited;
  }
  await cluster?.stop();
  await backend?.close();
});

/** An agent process; its token decides who owns the names it takes. */
function agent(token: string, args: string[]): Spawned {
  const spawned = spawnCli(['http', String(backend.port), '--json', '--token', token, ...args]);
  agents.push(spawned);
  return spawned;
}

function ping(node: ClusterNode, name: string) {
  return send({ port: node.port, path: '/loadtest/ping', headers: ['Host', `${name}.localhost`] });
}

/** The node holding `name` (asked of the first node: the answer names the holder). */
async function holderOf(name: string): Promise<ClusterNode> {
  const res = await ping(cluster.nodes[0]!, name);
  expect(res.status).toBe(200);
  const holder = cluster.nodes.find((node) => node.id === res.headers['x-tunnel2-node']);
  expect(holder).toBeDefined();
  return holder!;
}

/** Resolves once `spawned`'s stderr (the edge's JSON log) contains `text`; bounded in time. */
async function logged(spawned: Spawned, text: string): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!spawned.stderr().includes(text)) {
    if (Date.now() > deadline) throw new Error(`no "${text}" in the log: ${spawned.stderr().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits for the next `event` line after `from` events (a reconnecting agent emits the same names again). */
async function nextEvent(spawned: Spawned, name: string, from: number): Promise<Record<string, unknown>> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const found = spawned.events.slice(from).find((e) => e.event === name);
    if (found) return found;
    if (spawned.child.exitCode !== null) throw new Error(`agent exited: ${spawned.stderr()}`);
    if (Date.now() > deadline) throw new Error(`no "${name}" event: ${JSON.stringify(spawned.events)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function readyz(node: ClusterNode): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await send({ port: node.adminPort, path: '/readyz' });
  return { status: res.status, body: JSON.parse(res.body.toString()) as Record<string, unknown> };
}

describe('Redis stopped and restarted under three nodes', () => {
  it('connected sessions keep serving, new claims get a specific 503, and leases come back by themselves', async () => {
    const kept = agent('token-a', ['--server', cluster.lbUrl, '--subdomain', 'keep']);
    await kept.waitFor('ready');
    const holder = await holderOf('keep');
    const other = cluster.nodes.find((node) => node.id !== holder.id)!;
    expect((await readyz(holder)).status).toBe(200);

    await cluster.redis.stop();
    const stoppedAt = Date.now();

    // Requests to the holder keep working for longer than a whole lease period with no registry at all.
    let served = 0;
    while (Date.now() - stoppedAt < 2 * LEASE_TTL_MS) {
      const res = await ping(holder, 'keep');
      expect(res.status).toBe(200);
      expect(res.body.toString()).toBe('pong');
      served++;
    }
    expect(served).toBeGreaterThan(1);
    await logged(holder.edge, 'lease renewal failed');

    // /readyz says the registry is the problem (liveness stays fine).
    const ready = await readyz(holder);
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ ready: false, accepting: true });
    expect(String(ready.body.registry)).not.toBe('ok');

    // A name no node holds cannot be looked up: a prompt, specific 503, not a 404 and not a hang.
    const unknown = await ping(other, 'nobody');
    expect(unknown.status).toBe(503);
    expect(unknown.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_REGISTRY_UNAVAILABLE');
    // A held name asked of another node: served from its owner cache, or the same specific 503.
    const across = await ping(other, 'keep');
    expect([200, 503]).toContain(across.status);
    if (across.status === 503)
      expect(across.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_REGISTRY_UNAVAILABLE');

    // A new agent is refused with a specific 503 and keeps retrying instead of exiting.
    const fresh = agent('token-b', ['--server', `http://127.0.0.1:${other.port}`, '--subdomain', 'fresh']);
    const refused = await nextEvent(fresh, 'error', 0);
    expect(refused).toMatchObject({
      status: 503,
      edgeCode: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE',
      fatal: false,
    });
    await nextEvent(fresh, 'reconnecting', 0);

    // Redis comes back empty (no persistence): the holder re-claims its live session with a new epoch,
    // the waiting agent gets its name, and both are served from every node, with no operator action.
    await cluster.redis.start();
    await logged(holder.edge, 'lease re-asserted after it expired');
    await fresh.waitFor('ready');
    const deadline = Date.now() + DEADLINE_MS;
    let crossed = false;
    while (!crossed && Date.now() < deadline) {
      // A node retries its announcement every 0.5 s while the registry is away: until it is back, others
      // cannot reach the holder.
      const res = await ping(other, 'keep');
      crossed = res.status === 200 && res.headers['x-tunnel2-node'] === holder.id;
      if (!crossed) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(crossed).toBe(true);
    expect((await readyz(holder)).status).toBe(200);
    expect(kept.child.exitCode).toBeNull();
    const freshHolder = await holderOf('fresh');
    expect(freshHolder.id).toBe(other.id);
  }, 60_000);
});

describe('two agents, one name, two nodes', () => {
  it('exactly one of two racing owners wins; the same token elsewhere takes over and the old one is closed', async () => {
    await cluster.redis.start(); // a no-op unless the test above failed half-way with Redis stopped
    const [n0, n1, n2] = cluster.nodes as [ClusterNode, ClusterNode, ClusterNode];
    // Two different owners (two tokens) race for one name on two nodes.
    const racers = [
      agent('token-a', ['--server', `http://127.0.0.1:${n0.port}`, '--subdomain', 'race']),
      agent('token-b', ['--server', `http://127.0.0.1:${n1.port}`, '--subdomain', 'race']),
    ];
    const outcomes = await Promise.all(
      racers.map(
        (racer) =>
          new Promise<string>((resolve) => {
            void racer.waitFor('ready').then(
              () => resolve('ready'),
              () => resolve('exited'),
            );
            void racer.waitFor('error').then(
              (e) => resolve(String(e.edgeCode)),
              () => undefined,
            );
          }),
      ),
    );
    // Sorted as a copy: the winner is found by its index in the original order below.
    expect([...outcomes].sort()).toEqual(['TUNNEL2_ERR_NAME_IN_USE', 'ready']);
    const winner = racers[outcomes.indexOf('ready')]!;
    expect(winner.child.exitCode).toBeNull();

    // The same token on two nodes: the second connection takes the name over (a new epoch); the first
    // node is told at once by the claiming one (e2e-cluster-takeover.test.ts shows that path alone) and
    // closes its connection as replaced.
    const first = agent('token-c', ['--server', `http://127.0.0.1:${n0.port}`, '--subdomain', 'moving']);
    await first.waitFor('ready');
    expect((await holderOf('moving')).id).toBe(n0.id);
    const second = agent('token-c', ['--server', `http://127.0.0.1:${n2.port}`, '--subdomain', 'moving']);
    await second.waitFor('ready');
    const replaced = await nextEvent(first, 'error', 0);
    expect(replaced).toMatchObject({ fatal: true });
    await logged(n0.edge, 'session taken over by the same agent on another node');
    // Never two live owners: every node now sends the name to the new holder.
    for (const node of cluster.nodes) {
      const res = await ping(node, 'moving');
      expect(res.status).toBe(200);
      expect(res.headers['x-tunnel2-node']).toBe(n2.id);
    }
    expect(second.child.exitCode).toBeNull();
  }, 60_000);
});
