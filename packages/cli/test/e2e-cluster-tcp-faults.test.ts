import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect as netConnect, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';
import {
  findCommand,
  freePort,
  type Haproxy,
  type RedisServer,
  startHaproxy,
  startRedisServer,
} from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectTcp, type Tunnel } from '../src/index.js';
import { CLUSTER_SECRET } from './support/cluster-harness.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';
import { howItEnds, portRange, startEchoServer } from './support/tcp-stack.js';

// TCP tunnels in a cluster when nodes fail: a real redis-server, three real `tunnel2 server` processes
// (each on its own loopback address, so each listens on the whole TCP range as on its own host), Debian's
// HAProxy in front for the agents (so an agent whose node went away reconnects to a surviving one), and
// real agents. Public clients connect to a node's own address, as they would to a DNS name per node.

const run = promisify(execFile);
/** One token per test: a closed tunnel's port stays its token's for the grace. */
const token = (i: number): string => `token-tcp-fault-${i}`;
const RANGE = portRange(8);
/** Bound on every wait below: far above the lease, health-check and backoff periods involved. */
const DEADLINE_MS = 20_000;

interface Node {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly adminPort: number;
  edge: Spawned;
}

/** SIGTERMs a node and waits until it drains; answers whether it has exited since. */
async function startDrain(node: Node): Promise<() => boolean> {
  let exited = false;
  void node.edge.exited.then(() => {
    exited = true;
  });
  node.edge.kill('SIGTERM');
  await node.edge.waitFor('draining');
  return () => exited;
}

let redis: RedisServer;
let lb: Haproxy;
const nodes: Node[] = [];
const servers: Server[] = [];
const tunnels: Tunnel[] = [];

function nodeArgs(node: Omit<Node, 'edge'>): string[] {
  return [
    'server',
    '--json',
    '--host',
    node.host,
    '--port',
    String(node.port),
    '--admin-host',
    node.host,
    '--admin-port',
    String(node.adminPort),
    '--registry',
    redis.url,
    '--node-id',
    node.id,
    '--node-url',
    `http://${node.host}:${node.port}`,
    '--cluster-secret',
    CLUSTER_SECRET,
    '--trust-proxy',
    '127.0.0.1',
    '--tcp-ports',
    RANGE,
    // Short leases: a re-asserted port is back in the registry within a second.
    '--lease-ttl-ms',
    '1500',
    ...Array.from({ length: 8 }, (_, i) => ['--token', token(i)]).flat(),
  ];
}

async function startNode(i: number): Promise<Node> {
  const base = {
    id: `node-${i}`,
    host: `127.0.0.${21 + i}`,
    port: await freePort(),
    adminPort: await freePort(),
  };
  const edge = spawnCli(nodeArgs(base));
  await edge.waitFor('listening');
  return { ...base, edge };
}

/** Starts a node again on its ports once its process has exited. */
async function restart(node: Node): Promise<void> {
  await node.edge.exited;
  node.edge = spawnCli(nodeArgs(node));
  await node.edge.waitFor('listening');
}

beforeAll(async () => {
  redis = await startRedisServer();
  for (let i = 0; i < 3; i++) nodes.push(await startNode(i));
  lb = await startHaproxy(
    nodes.map((node) => ({ host: node.host, port: node.port, adminPort: node.adminPort })),
    { checks: { http: true, interMs: 100, fall: 1, rise: 2 } },
  );
}, 60_000);

afterEach(async () => {
  for (const tunnel of tunnels.splice(0)) await tunnel.close(0);
  // Every test leaves three nodes running.
  for (const node of nodes) if (!running(node)) await restart(node);
});

afterAll(async () => {
  for (const tunnel of tunnels.splice(0)) await tunnel.close(0);
  await lb?.stop();
  for (const node of nodes) {
    node.edge.kill('SIGKILL');
    await node.edge.exited;
  }
  for (const server of servers) server.close();
  await redis?.stop();
});

/** An echo server (closed after the file). */
async function startEcho(): Promise<number> {
  const { port, server } = await startEchoServer();
  servers.push(server);
  return port;
}

/** A TCP tunnel through HAProxy; `ready` counts its sessions (the first, then one per reconnect). */
async function tunnelVia(
  target: number,
  tokenName: string,
): Promise<{ tunnel: Tunnel; port: number; readies: () => number }> {
  let ready = 0;
  const tunnel = await connectTcp({
    target,
    server: lb.url,
    token: tokenName,
    logger: silent,
    reconnect: { initialMs: 50, maxMs: 500 },
  });
  tunnels.push(tunnel);
  tunnel.on('ready', () => ready++);
  return { tunnel, port: tunnel.info?.tcp?.port ?? 0, readies: () => ready };
}

/** Polls `check` until it holds; false once `DEADLINE_MS` passed (bounded in time and in count). */
async function until(check: () => boolean | Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + DEADLINE_MS;
  for (let i = 0; i < 2_000 && Date.now() < deadline; i++) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

function running(node: Node): boolean {
  return node.edge.child.exitCode === null && node.edge.child.signalCode === null;
}

/** The value of the metric line starting with `line`; a node that does not export it fails the test. */
async function metric(node: Node, line: string): Promise<number> {
  const res = await fetch(`http://${node.host}:${node.adminPort}/metrics`);
  const found = (await res.text()).split('\n').find((l) => l.startsWith(line));
  if (found === undefined) throw new Error(`no metric line "${line}" on ${node.host}`);
  return Number(found.split(' ')[1]);
}

/** The node serving the agent's session now (each test has one agent connected at a time). */
async function holder(): Promise<Node> {
  let found: Node | undefined;
  const seen = await until(async () => {
    for (const node of nodes) {
      if (!running(node)) continue;
      if ((await metric(node, 'tunnel2_sessions_connected ').catch(() => 0)) === 1) found = node;
    }
    return found !== undefined;
  });
  if (!seen || found === undefined) throw new Error('no node serves the agent');
  return found;
}

function others(...not: Node[]): Node[] {
  return nodes.filter((node) => !not.includes(node));
}

/** One client connection that echoes in steps: each `step` sends bytes and waits until they came back. */
async function openEcho(via: Node, port: number) {
  const socket: Socket = netConnect({ host: via.host, port, allowHalfOpen: true });
  socket.on('error', () => {});
  await once(socket, 'connect');
  const sent = createHash('sha256');
  const received = createHash('sha256');
  let sentBytes = 0;
  let receivedBytes = 0;
  const arrivals: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    received.update(chunk);
    receivedBytes += chunk.length;
    for (const wake of arrivals.splice(0)) wake();
  });
  const ended = howItEnds(socket);
  return {
    socket,
    ended,
    /** Sends `bytes` and resolves once all sent so far came back. */
    async step(bytes: number): Promise<void> {
      const part = randomBytes(bytes);
      sent.update(part);
      sentBytes += bytes;
      if (socket.destroyed) return;
      if (!socket.write(part)) await Promise.race([once(socket, 'drain'), ended]);
      while (receivedBytes < sentBytes) {
        await Promise.race([new Promise<void>((resolve) => arrivals.push(resolve)), ended]);
        if (socket.destroyed) return;
      }
    },
    /** Half-closes and resolves with how the connection ended and whether every byte came back. */
    async finish(): Promise<{ how: string; exact: boolean }> {
      socket.end();
      const how = await ended;
      socket.destroy();
      return { how, exact: receivedBytes === sentBytes && sent.digest('hex') === received.digest('hex') };
    },
  };
}

/** An echo tunnel for `tokenName`, the node serving it, and another node that carries to it. */
async function echoTunnel(tokenName: string) {
  const tunnel = await tunnelVia(await startEcho(), tokenName);
  const held = await holder();
  const [via] = others(held);
  if (via === undefined) throw new Error('no forwarding node');
  return { ...tunnel, held, via };
}

/** Whether a fresh connection through `via` echoes 64 KiB byte-exact, at the first attempt. */
async function worksThrough(via: Node, port: number): Promise<boolean> {
  const client = await openEcho(via, port);
  await client.step(64 * 1024);
  const result = await client.finish();
  return result.how === 'end' && result.exact;
}

describe('TCP tunnels in a cluster when a node fails', () => {
  it('kill -9 of the holder: a carried connection is reset, the agent moves and keeps its port', async () => {
    const { port, readies, held, via } = await echoTunnel(token(0));
    const client = await openEcho(via, port);
    await client.step(256 * 1024);
    held.edge.kill('SIGKILL');
    await held.edge.exited;
    // The bytes in flight are lost: the client must learn it from an RST, never from a clean FIN.
    expect(await client.ended).toBe('ECONNRESET');
    expect(await until(() => readies() >= 1)).toBe(true);
    const now = await holder();
    expect(now).not.toBe(held);
    expect(tunnels[0]?.info?.tcp?.port).toBe(port);
    for (const node of others(held)) expect(await worksThrough(node, port)).toBe(true);
  });

  it('SIGTERM of the forwarding node: the carried connection finishes byte-exact, then the node exits', async () => {
    const { port, via } = await echoTunnel(token(1));
    const client = await openEcho(via, port);
    await client.step(256 * 1024);
    const exited = await startDrain(via);
    await client.step(1024 * 1024 + 3);
    expect(exited()).toBe(false);
    expect(await client.finish()).toEqual({ how: 'end', exact: true });
    expect(await via.edge.exited).toBe(0);
    for (const node of others(via)) expect(await worksThrough(node, port)).toBe(true);
  });

  it('SIGTERM of the holder: direct and carried connections finish byte-exact, the agent moves and keeps its port', async () => {
    const { port, readies, held, via } = await echoTunnel(token(2));
    const direct = await openEcho(held, port);
    const carried = await openEcho(via, port);
    await direct.step(128 * 1024);
    await carried.step(128 * 1024);
    held.edge.kill('SIGTERM');
    await held.edge.waitFor('draining');
    await direct.step(512 * 1024 + 1);
    await carried.step(512 * 1024 + 5);
    expect(await carried.finish()).toEqual({ how: 'end', exact: true });
    // The connection straight to the holder is the last one open: the drain waits for it too.
    await direct.step(256 * 1024 + 7);
    expect(await direct.finish()).toEqual({ how: 'end', exact: true });
    expect(await held.edge.exited).toBe(0);
    expect(await until(() => readies() >= 1)).toBe(true);
    expect(await holder()).not.toBe(held);
    expect(tunnels[0]?.info?.tcp?.port).toBe(port);
    for (const node of others(held)) expect(await worksThrough(node, port)).toBe(true);
  });
});

describe('TCP tunnels in a cluster: connections that arrive while the holder drains', () => {
  it('are held on the other nodes and carried to the agent’s new node, none reset', async () => {
    const { port, readies, held, via } = await echoTunnel(token(5));
    const [third] = others(held, via);
    if (third === undefined) throw new Error('no third node');
    // A connection open through the holder keeps its session (and the drain) going while new ones arrive.
    const long = await openEcho(via, port);
    await long.step(64 * 1024);
    held.edge.kill('SIGTERM');
    await held.edge.waitFor('draining');
    // Arrive while the holder drains and the agent cannot move yet: each must be held, not reset.
    const arrivals = await Promise.all([via, third, via, third].map((node) => openEcho(node, port)));
    const answered = arrivals.map(async (client) => {
      await client.step(16 * 1024 + 1);
      return client.finish();
    });
    expect(await long.finish()).toEqual({ how: 'end', exact: true });
    // And a steady stream of new connections across the move, until a while after the agent came back.
    let after = 0;
    for (let i = 0; i < 200 && after < 5; i++) {
      if (readies() >= 1) after++;
      const client = await openEcho(i % 2 === 0 ? via : third, port);
      await client.step(4 * 1024 + i);
      expect(await client.finish()).toEqual({ how: 'end', exact: true });
    }
    expect(after).toBe(5);
    for (const result of await Promise.all(answered)) expect(result).toEqual({ how: 'end', exact: true });
    expect(await held.edge.exited).toBe(0);
    expect(await holder()).not.toBe(held);
  });

  it('are held on the draining holder itself and carried from it to the agent’s new node', async () => {
    const { port, readies, held, via } = await echoTunnel(token(6));
    const long = await openEcho(held, port);
    await long.step(64 * 1024);
    const exited = await startDrain(held);
    // The draining node still listens on its ports: a new client there waits, unread, for the agent.
    const late = await openEcho(held, port);
    const answered = late.step(32 * 1024 + 3).then(() => late.finish());
    expect(await long.finish()).toEqual({ how: 'end', exact: true });
    expect(await answered).toEqual({ how: 'end', exact: true });
    expect(readies()).toBeGreaterThanOrEqual(1);
    expect(exited()).toBe(false);
    expect(await held.edge.exited).toBe(0);
    expect(await worksThrough(via, port)).toBe(true);
  });

  it('are reset once the wait for the agent runs out when it is gone for good', async () => {
    const { tunnel, port, held, via } = await echoTunnel(token(7));
    await tunnel.close(0);
    tunnels.splice(tunnels.indexOf(tunnel), 1);
    expect(await until(async () => (await metric(held, 'tunnel2_sessions_connected ')) === 0)).toBe(true);
    // The port stays reserved for its token (the grace): connections wait for a reconnect that never comes.
    const ends = [
      howItEnds(netConnect({ host: via.host, port })),
      howItEnds(netConnect({ host: held.host, port })),
    ];
    // Each is held on the node it reached while it waits (not reset at once)...
    const heldOn = (node: Node) => metric(node, 'tunnel2_tcp_connections_held ');
    expect(await until(async () => (await heldOn(via)) > 0 && (await heldOn(held)) > 0)).toBe(true);
    // ...then reset when the wait runs out, and no longer counted.
    expect(await Promise.all(ends)).toEqual(['ECONNRESET', 'ECONNRESET']);
    expect(await heldOn(held)).toBe(0);
    expect(await heldOn(via)).toBe(0);
  });
});

describe('TCP tunnels in a cluster when the registry restarts empty', () => {
  it('live connections go on, and the holder claims its port again', async () => {
    const redisCli = findCommand('redis-cli', 'redis-tools');
    const { port, held, via } = await echoTunnel(token(3));
    const direct = await openEcho(held, port);
    const carried = await openEcho(via, port);
    await direct.step(64 * 1024);
    await carried.step(64 * 1024);
    const record = async (): Promise<string> => {
      const keys = await run(redisCli, ['-p', String(redis.port), '--scan', '--pattern', `*:s:tcp:${port}`]);
      const key = keys.stdout.trim();
      if (key === '') return '';
      return (await run(redisCli, ['-p', String(redis.port), 'HGET', key, 'nodeId'])).stdout.trim();
    };
    expect(await record()).toBe(held.id);
    await run(redisCli, ['-p', String(redis.port), 'FLUSHALL']);
    expect(await record()).toBe('');
    // Re-asserted at the holder's next renewal round, for the same node.
    expect(await until(async () => (await record()) === held.id)).toBe(true);
    await direct.step(256 * 1024);
    await carried.step(256 * 1024);
    expect(await direct.finish()).toEqual({ how: 'end', exact: true });
    expect(await carried.finish()).toEqual({ how: 'end', exact: true });
    // Still its owner's: another token is refused the port, and new connections reach the agent.
    await expect(
      connectTcp({
        target: 1,
        server: `http://${via.host}:${via.port}`,
        token: token(4),
        remotePort: port,
        logger: silent,
      }),
    ).rejects.toMatchObject({ edgeCode: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE' });
    for (const node of nodes) expect(await worksThrough(node, port)).toBe(true);
  });
});
