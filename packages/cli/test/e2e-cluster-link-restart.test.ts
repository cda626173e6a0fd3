import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { clusterNodeArgs, freePort, startRedisServer } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisRegistry } from '../../registry/src/redis-registry.js';
import type { SessionRegistry } from '../../registry/src/session-registry.js';
import { connect, connectTcp, type Tunnel } from '../src/index.js';
import { CLUSTER_SECRET as SECRET } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';
import { portRange, startEchoServer } from './support/tcp-stack.js';

// Issue #29 defect 6, follow-up: the v2 link handshake signs the target node id, and a node's id is new in
// every process unless configured. A node killed and started again at the same address answers links
// signed for its old id, which its peers still name for a while (their owner caches, its node record until
// its TTL). It must answer them as "that node is not here" (421), not as a forgery (403): a peer that took
// a 403 forwarded to it over the HTTP hop for 60 s, and alternating ids closed its healthy link.

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const TOKEN = 'token-link-restart';
/** TCP ports every node listens on: A on 127.0.0.1, B on 127.0.0.2 (as nodes on two hosts would). */
const RANGE = portRange(4);
const B_HOST = '127.0.0.2';

/** `tunnel2 server` as node `id` on `port` of B_HOST, with its operations port for /metrics. */
async function startNode(redisUrl: string, id: string, port: number, adminPort: number): Promise<Spawned> {
  const edge = spawnCli([
    'server',
    '--json',
    ...clusterNodeArgs({ redisUrl, id, port, secret: SECRET, host: B_HOST }),
    '--admin-port',
    String(adminPort),
    '--tcp-ports',
    RANGE,
    '--token',
    TOKEN,
  ]);
  cleanups.push(async () => {
    edge.kill('SIGKILL');
    await edge.exited;
  });
  await edge.waitFor('listening');
  return edge;
}

/** Bytes through a TCP port of node A, half-closed: what came back. */
async function echoed(port: number, bytes: Buffer): Promise<Buffer> {
  const socket = netConnect({ host: '127.0.0.1', port, allowHalfOpen: true });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.end(bytes);
  await once(socket, 'close');
  return Buffer.concat(chunks);
}

/** A Prometheus counter's value on a node's operations port. */
async function metric(adminPort: number, name: string): Promise<number> {
  const answer = await send({ port: adminPort, path: '/metrics' });
  const line = answer.body
    .toString()
    .split('\n')
    .find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? Number.NaN);
}

describe('a peer node restarted at the same address with a new node id', () => {
  let a: Edge;
  let registry: SessionRegistry;
  let bPort: number;
  let bAdminPort: number;
  let bUrl: string;
  let b: Spawned;
  let redisUrl: string;
  let portA: number;
  let tcpPort: number;

  /** Kills B (`-9`) and starts it again at the same address as `id`; resolves once `name` is held there. */
  async function restartB(id: string, name: string): Promise<void> {
    b.kill('SIGKILL');
    await b.exited;
    b = await startNode(redisUrl, id, bPort, bAdminPort);
    // The agents are back, on the new process: the registry names it now, A's cache still the old id.
    // Bounded by the test's timeout; asked every 20 ms.
    while ((await registry.lookup(name))?.nodeId !== id)
      await new Promise((resolve) => setTimeout(resolve, 20));
  }

  beforeAll(async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    redisUrl = redis.url;
    registry = await createRedisRegistry({ url: redis.url });
    cleanups.push(() => registry.close());
    // A keeps its owner-cache entries a minute: the request after B's restart surely names B's old id.
    a = buildEdge({
      port: 0,
      logger: silent,
      nodeId: 'node-a',
      registry: await createRedisRegistry({ url: redis.url }),
      cluster: { secret: SECRET, ownerCacheTtlMs: 60_000 },
      host: '127.0.0.1',
      tcpPorts: RANGE,
    });
    cleanups.push(() => a.close(0));
    portA = (await a.listen()).port;
    bPort = await freePort();
    bAdminPort = await freePort();
    bUrl = `http://${B_HOST}:${bPort}`;
    b = await startNode(redis.url, 'node-b1', bPort, bAdminPort);
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const tunnel: Tunnel = await connect({
      target: backend.port,
      server: bUrl,
      subdomain: 'shop',
      token: TOKEN,
      logger: silent,
      reconnect: { initialMs: 50, maxMs: 250 },
    });
    cleanups.push(() => tunnel.close(0));
    const echo = await startEchoServer();
    cleanups.push(() => new Promise((resolve) => echo.server.close(resolve)));
    const tcp: Tunnel = await connectTcp({
      target: echo.port,
      server: bUrl,
      token: TOKEN,
      logger: silent,
      reconnect: { initialMs: 50, maxMs: 250 },
    });
    cleanups.push(() => tcp.close(0));
    tcpPort = tcp.info?.tcp?.port ?? 0;
    const answer = await send({ port: portA, path: '/loadtest/ping', headers: ['Host', 'shop.localhost'] });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-tunnel2-node']).toBe('node-b1');
    expect(a.cluster?.links?.size).toBe(1);
  });

  it('is reached over a link under its new id, not over the HTTP hop, with a request body, and counts no forgery', async () => {
    await restartB('node-b2', 'shop');
    const unreachable = a.cluster?.counters.forwarded.unreachable ?? 0;
    // With a body: nothing of it was read when the link for node-b1 was refused, so it is sent on whole.
    const body = Buffer.from('posted while node-b1 was still named');
    const answer = await send({
      port: portA,
      method: 'POST',
      path: '/loadtest/echo',
      headers: ['Host', 'shop.localhost', 'Content-Type', 'text/plain'],
      body,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.equals(body)).toBe(true);
    expect(answer.headers['x-tunnel2-node']).toBe('node-b2');
    // The link for node-b1 was answered 421: node-b1 counted unreachable once, then looked up again.
    expect(a.cluster?.counters.forwarded.unreachable).toBe(unreachable + 1);
    expect(a.cluster?.links?.viaHop(bUrl)).toBe(false);
    expect(a.cluster?.links?.size).toBe(1);
    expect(await metric(bAdminPort, 'tunnel2_cluster_node_auth_refused_total')).toBe(0);
    // Requests keep going over that one link.
    for (let i = 0; i < 3; i++) {
      const again = await send({ port: portA, path: '/loadtest/ping', headers: ['Host', 'shop.localhost'] });
      expect(again.status).toBe(200);
    }
    expect(a.cluster?.links?.viaHop(bUrl)).toBe(false);
    expect(a.cluster?.links?.size).toBe(1);
  });

  it('carries a TCP connection to the port it holds under its newest id, over a link', async () => {
    // A's cache learns who holds the port, over a link, then the node restarts once more.
    expect((await echoed(tcpPort, Buffer.from('before'))).toString()).toBe('before');
    await restartB('node-b3', `tcp:${tcpPort}`);
    const unreachable = a.cluster?.counters.forwarded.unreachable ?? 0;
    expect((await echoed(tcpPort, Buffer.from('after a restart'))).toString()).toBe('after a restart');
    // The link for node-b2 was answered 421; the connection was carried to node-b3 all the same.
    expect(a.cluster?.counters.forwarded.unreachable).toBe(unreachable + 1);
    expect(a.cluster?.links?.viaHop(bUrl)).toBe(false);
    expect(a.cluster?.links?.size).toBe(1);
    expect(await metric(bAdminPort, 'tunnel2_cluster_node_auth_refused_total')).toBe(0);
  });
});
