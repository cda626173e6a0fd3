import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeAuth } from '../../edge/src/cluster/node-auth.js';
import { TAKEOVER_PATH, takeoverTarget } from '../../edge/src/cluster/takeover-notice.js';
import { createRedisRegistry } from '../../registry/src/redis-registry.js';
import type { SessionRegistry } from '../../registry/src/session-registry.js';
import { CLUSTER_SECRET, type Cluster, type ClusterNode, startCluster } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { until } from './support/stack.js';

// The same agent token reconnecting on another node: the claiming node tells the old one at once (a signed
// takeover notice), which closes its connection, instead of serving through it until its next renewal.
// Leases are long (120 s, renewed every 40 s) so nothing here can come from a renewal round; the notice
// counters on /metrics say which path closed the connection.

const LEASE_TTL_MS = 120_000;
/** Far below the 40 s renewal period, far above a notice's loopback round trip on a busy machine. */
const CLOSED_WITHIN_MS = 3_000;
const TOKEN = 'token-takeover';

let cluster: Cluster;
let registry: SessionRegistry;
const agents: Spawned[] = [];
const backends: Server[] = [];

/** A backend that answers every request with `word`: which agent served a request is in its body. */
async function backend(word: string): Promise<number> {
  const server = createServer((_req, res) => res.end(word));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  backends.push(server);
  return (server.address() as AddressInfo).port;
}

function agent(port: number, node: ClusterNode, name: string): Spawned {
  const spawned = spawnCli([
    'http',
    String(port),
    '--json',
    '--token',
    TOKEN,
    '--server',
    `http://127.0.0.1:${node.port}`,
    '--subdomain',
    name,
  ]);
  agents.push(spawned);
  return spawned;
}

function ping(node: ClusterNode, name: string) {
  return send({ port: node.port, path: '/', headers: ['Host', `${name}.localhost`] });
}

/** One sample of a counter from a node's /metrics (0 when absent). */
async function counter(node: ClusterNode, name: string, outcome: string): Promise<number> {
  const res = await send({ port: node.adminPort, path: '/metrics' });
  const line = res.body
    .toString()
    .split('\n')
    .find((l) => l.startsWith(`${name}{outcome="${outcome}"}`));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/** A notice posted straight to a node's public port, as a peer (or an impostor) would. */
function notice(node: ClusterNode, target: string, signature?: string) {
  return send({
    port: node.port,
    path: target,
    method: 'POST',
    headers: [
      'Host',
      `127.0.0.1:${node.port}`,
      'Content-Length',
      '0',
      ...(signature === undefined ? [] : ['x-tunnel2-node-auth', signature]),
    ],
  });
}

beforeAll(async () => {
  cluster = await startCluster({
    nodes: 2,
    edgeArgs: ['--lease-ttl-ms', String(LEASE_TTL_MS), '--token', TOKEN],
  });
  registry = await createRedisRegistry({ url: cluster.redis.url });
}, 30_000);

afterAll(async () => {
  for (const spawned of agents) {
    spawned.kill('SIGKILL');
    await spawned.exited;
  }
  await registry?.close();
  await cluster?.stop();
  for (const server of backends) server.close();
});

describe('takeover across nodes', () => {
  it('closes the old connection at once when the same token claims the name on another node', async () => {
    const [a, b] = cluster.nodes as [ClusterNode, ClusterNode];
    const first = agent(await backend('old'), a, 'moving');
    await first.waitFor('ready');
    const before = await ping(a, 'moving');
    expect(before.body.toString()).toBe('old');
    expect(before.headers['x-tunnel2-node']).toBe(a.id);

    const started = Date.now();
    const second = agent(await backend('new'), b, 'moving');
    const replaced = await first.waitFor('error');
    const elapsed = Date.now() - started;
    expect(replaced).toMatchObject({ fatal: true });
    expect(elapsed).toBeLessThan(CLOSED_WITHIN_MS);
    // The notice closed it, not a renewal round.
    expect(await counter(b, 'tunnel2_cluster_takeover_notices_sent_total', 'delivered')).toBe(1);
    expect(await counter(a, 'tunnel2_cluster_takeover_notices_received_total', 'closed')).toBe(1);
    // The edge logs it as it closes the connection; the line reaches its stderr (a pipe) a moment later.
    await until(() => a.edge.stderr().includes('session taken over by the same agent on another node'), {
      what: "node A's log line saying the session was taken over",
      timeoutMs: 5_000,
    });

    // A request that reaches the old node now goes to the new agent, and so does one on the new node.
    await second.waitFor('ready');
    for (const node of [a, b]) {
      const res = await ping(node, 'moving');
      expect(res.status).toBe(200);
      expect(res.body.toString()).toBe('new');
      expect(res.headers['x-tunnel2-node']).toBe(b.id);
    }
    expect(second.child.exitCode).toBeNull();
  }, 60_000);

  it('refuses an unsigned or forged notice and closes nothing', async () => {
    const [a] = cluster.nodes as [ClusterNode, ClusterNode];
    const kept = agent(await backend('kept'), a, 'forged');
    await kept.waitFor('ready');
    const target = takeoverTarget({ toNode: a.id, name: 'forged', epoch: 2 ** 52, owner: 'anyone' });

    // Unsigned: the answer every path the edge does not know gets.
    const unsigned = await notice(a, target);
    const unknown = await notice(a, `${TAKEOVER_PATH}-not-a-route?name=forged`);
    expect(unsigned.status).toBe(404);
    expect(unsigned.status).toBe(unknown.status);
    expect(unsigned.headers['x-tunnel2-error']).toBe(unknown.headers['x-tunnel2-error']);

    // Signed with another secret, or a well-formed value that is not a signature at all: 403.
    const otherSecret = new NodeAuth(`${CLUSTER_SECRET}-not-ours`).signNotice('node-1', 'POST', target);
    const made = `v1 node-1 ${Date.now()} ${'0'.repeat(64)}`;
    for (const signature of [otherSecret, made]) {
      const res = await notice(a, target, signature);
      expect(res.status).toBe(403);
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_NODE_AUTH_INVALID');
    }
    // A real signature over another target (a notice for another name, or to another node) is no
    // signature for this one.
    const elsewhere = takeoverTarget({ toNode: a.id, name: 'other', epoch: 2 ** 52, owner: 'anyone' });
    const moved = new NodeAuth(CLUSTER_SECRET).signNotice('node-1', 'POST', elsewhere);
    expect((await notice(a, target, moved)).status).toBe(403);
    const toB = takeoverTarget({ toNode: 'node-1', name: 'forged', epoch: 2 ** 52, owner: 'anyone' });
    const addressed = await notice(a, toB, new NodeAuth(CLUSTER_SECRET).signNotice('node-1', 'POST', toB));
    expect(addressed.status).toBe(400);

    const still = await ping(a, 'forged');
    expect(still.body.toString()).toBe('kept');
    expect(still.headers['x-tunnel2-node']).toBe(a.id);
    expect(kept.events.some((e) => e.event === 'error')).toBe(false);
    expect(await counter(a, 'tunnel2_cluster_takeover_notices_received_total', 'closed')).toBe(1);
  }, 60_000);

  it('a stale notice (an epoch not newer than the connection) closes nothing', async () => {
    const [a] = cluster.nodes as [ClusterNode, ClusterNode];
    const kept = agent(await backend('current'), a, 'stale');
    await kept.waitFor('ready');
    const record = await registry.lookup('stale');
    expect(record).toMatchObject({ nodeId: a.id, connected: true });
    const auth = new NodeAuth(CLUSTER_SECRET);
    const keptBefore = await counter(a, 'tunnel2_cluster_takeover_notices_received_total', 'kept');
    // A late notice about an older claim, and a replay naming exactly the connection's own claim.
    for (const epoch of [record!.epoch - 1, record!.epoch]) {
      const target = takeoverTarget({ toNode: a.id, name: 'stale', epoch, owner: record!.owner });
      const res = await notice(a, target, auth.signNotice('node-1', 'POST', target));
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString())).toEqual({ closed: false });
    }
    expect(await counter(a, 'tunnel2_cluster_takeover_notices_received_total', 'kept')).toBe(keptBefore + 2);
    const still = await ping(a, 'stale');
    expect(still.body.toString()).toBe('current');
    expect(still.headers['x-tunnel2-node']).toBe(a.id);
    expect(kept.events.some((e) => e.event === 'error')).toBe(false);
  }, 60_000);
});
