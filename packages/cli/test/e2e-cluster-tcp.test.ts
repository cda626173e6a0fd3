import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect as netConnect, type Server, type Socket } from 'node:net';
import { freePort, type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectTcp, type Tunnel } from '../src/index.js';
import { CLUSTER_SECRET } from './support/cluster-harness.js';
import { crashedAgent } from './support/crashed-agent.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import {
  howItEnds,
  portRange,
  startEchoServer,
  startHashServer,
  startHoldingServer,
} from './support/tcp-stack.js';

// TCP tunnels in a cluster: three real `tunnel2 server` processes sharing a real redis-server, each on its
// own loopback address so that every node can listen on the whole TCP range (as nodes on three hosts
// would). A port claimed through one node answers on every node: the connection is carried over the node
// link to the node holding the agent's session.

/** One token per test: a closed tunnel's port stays its token's for the grace, and a token holds at most 2. */
const TOKENS: readonly string[] = Array.from({ length: 8 }, (_, i) => `token-tcp-${i}`);
const token = (i: number): string => TOKENS[i] ?? '';
/** Every port a test claimed (held, or reserved after its tunnel closed). */
const claimed = new Set<number>();
const RANGE = portRange(12);
const [FIRST, LAST] = RANGE.split('-').map(Number) as [number, number];

interface Node {
  host: string;
  port: number;
  adminPort: number;
  url: string;
  edge: Spawned;
}

let redis: RedisServer;
const nodes: Node[] = [];
const servers: Server[] = [];
const tunnels: Tunnel[] = [];

async function startNode(i: number): Promise<Node> {
  const host = `127.0.0.${i + 1}`;
  const port = await freePort();
  const adminPort = await freePort();
  const edge = spawnCli([
    'server',
    '--json',
    '--host',
    host,
    '--port',
    String(port),
    '--admin-port',
    String(adminPort),
    '--registry',
    redis.url,
    '--node-id',
    `node-${i}`,
    '--node-url',
    `http://${host}:${port}`,
    '--cluster-secret',
    CLUSTER_SECRET,
    '--tcp-ports',
    RANGE,
    '--max-tcp-ports-per-owner',
    '2',
    ...TOKENS.flatMap((token) => ['--token', token]),
  ]);
  await edge.waitFor('listening');
  return { host, port, adminPort, url: `http://${host}:${port}`, edge };
}

beforeAll(async () => {
  redis = await startRedisServer();
  for (let i = 0; i < 3; i++) nodes.push(await startNode(i));
}, 60_000);

afterEach(async () => {
  for (const tunnel of tunnels.splice(0)) await tunnel.close(0);
});

afterAll(async () => {
  for (const node of nodes) {
    node.edge.kill('SIGKILL');
    await node.edge.exited;
  }
  for (const server of servers) server.close();
  await redis?.stop();
});

function node(i: number): Node {
  const found = nodes[i];
  if (found === undefined) throw new Error(`no node ${i}`);
  return found;
}

async function tunnelTo(
  target: number,
  via: Node,
  options: { token?: string; remotePort?: number; allowIps?: string[] } = {},
): Promise<{ tunnel: Tunnel; port: number }> {
  const tunnel = await connectTcp({
    target,
    server: via.url,
    token: options.token ?? token(0),
    logger: silent,
    ...(options.remotePort === undefined ? {} : { remotePort: options.remotePort }),
    ...(options.allowIps === undefined ? {} : { allowIps: options.allowIps }),
  });
  tunnels.push(tunnel);
  const port = tunnel.info?.tcp?.port ?? 0;
  claimed.add(port);
  return { tunnel, port };
}

/** An echo server (closed after the file). */
async function startEcho(): Promise<number> {
  const { port, server } = await startEchoServer();
  servers.push(server);
  return port;
}

function connectVia(via: Node, port: number, localAddress?: string): Socket {
  return netConnect({ host: via.host, port, allowHalfOpen: true, ...(localAddress ? { localAddress } : {}) });
}

/** Sends `bytes` random bytes through an echo tunnel and checks that exactly they come back. */
async function echoes(via: Node, port: number, bytes: number): Promise<boolean> {
  const socket = connectVia(via, port);
  await once(socket, 'connect');
  const sent = createHash('sha256');
  const received = createHash('sha256');
  let count = 0;
  socket.on('data', (chunk: Buffer) => {
    received.update(chunk);
    count += chunk.length;
  });
  const ended = once(socket, 'end');
  const chunk = 256 * 1024;
  for (let done = 0; done < bytes; done += chunk) {
    const part = randomBytes(Math.min(chunk, bytes - done));
    sent.update(part);
    if (!socket.write(part)) await once(socket, 'drain');
  }
  socket.end();
  await ended;
  socket.destroy();
  return count === bytes && sent.digest('hex') === received.digest('hex');
}

/** Sends `bytes`, half-closes, and reads the hash server's digest on the still-open other direction. */
async function hashed(via: Node, port: number, bytes: number): Promise<boolean> {
  const socket = connectVia(via, port);
  await once(socket, 'connect');
  const hash = createHash('sha256');
  const answer: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => answer.push(chunk));
  const ended = once(socket, 'end');
  const part = randomBytes(bytes);
  hash.update(part);
  socket.end(part);
  await ended;
  socket.destroy();
  return Buffer.concat(answer).toString() === hash.digest('hex');
}

async function metric(via: Node, line: string): Promise<number> {
  const res = await send({ port: via.adminPort, path: '/metrics' });
  const found = res.body
    .toString()
    .split('\n')
    .find((l) => l.startsWith(line));
  return found === undefined ? 0 : Number(found.split(' ')[1]);
}

describe('TCP tunnels in a cluster', () => {
  it('a port claimed through one node carries MiB byte-exact both ways through every node', async () => {
    const { port } = await tunnelTo(await startEcho(), node(0));
    expect(port).toBeGreaterThanOrEqual(FIRST);
    expect(port).toBeLessThanOrEqual(LAST);
    for (const via of nodes) expect(await echoes(via, port, 4 * 1024 * 1024 + 7)).toBe(true);
    const forwarded = 'tunnel2_tcp_connections_total{outcome="forwarded"}';
    expect(await metric(node(1), forwarded)).toBeGreaterThanOrEqual(1);
    expect(await metric(node(2), forwarded)).toBeGreaterThanOrEqual(1);
    expect(await metric(node(0), 'tunnel2_tcp_connections_total{outcome="accepted"}')).toBeGreaterThanOrEqual(
      3,
    );
  });

  it('carries the half-close across the link: the answer comes after the client shut its write side', async () => {
    const backend = await startHashServer();
    servers.push(backend.server);
    const { port } = await tunnelTo(backend.port, node(1), { token: token(3) });
    expect(await hashed(node(2), port, 1024 * 1024)).toBe(true);
    expect(await hashed(node(0), port, 17)).toBe(true);
  });

  it('carries a reset both ways across the link', async () => {
    const holding = await startHoldingServer();
    const { port } = await tunnelTo(holding.port, node(0), { token: token(4) });
    // The backend resets: the client sees an RST, not a clean close.
    const client = connectVia(node(2), port);
    const clientEnd = howItEnds(client);
    client.write('x');
    await until(() => holding.latest() !== undefined);
    holding.latest()?.resetAndDestroy();
    expect(await clientEnd).toBe('ECONNRESET');
    // The client resets: the backend sees an RST.
    holding.forget();
    const second = connectVia(node(1), port);
    second.write('y');
    await until(() => holding.latest() !== undefined);
    const backendEnd = howItEnds(holding.latest()!);
    second.resetAndDestroy();
    expect(await backendEnd).toBe('ECONNRESET');
    await holding.close();
  });

  it('resets a connection at once, on every node, to a port nobody holds', async () => {
    await tunnelTo(await startEcho(), node(0), { token: token(5) });
    let free = FIRST;
    while (claimed.has(free)) free++;
    expect(free).toBeLessThanOrEqual(LAST);
    for (const via of nodes) expect(await howItEnds(connectVia(via, free))).toBe('ECONNRESET');
  });

  it('keeps the port for its token when the agent comes back through another node; another token cannot take it', async () => {
    const echo = await startEcho();
    // A crash: a graceful close would free the port at once (e2e-names-restart.test.ts).
    const crashed = await crashedAgent({ target: echo, server: node(0).url, token: token(1), tcp: {} });
    const first = { port: Number(new URL(crashed.url).port) };
    claimed.add(first.port);
    // The node has seen the agent leave (the port is now reserved, not served through a closing session).
    for (let i = 0; i < 200 && (await metric(node(0), 'tunnel2_sessions_connected ')) !== 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    // Reserved for its token through the grace: another token is refused on any node.
    await expect(
      connectTcp({
        target: echo,
        server: node(2).url,
        token: token(2),
        remotePort: first.port,
        logger: silent,
      }),
    ).rejects.toMatchObject({ edgeCode: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE' });
    const again = await tunnelTo(echo, node(1), { token: token(1), remotePort: first.port });
    expect(again.port).toBe(first.port);
    for (const via of nodes) expect(await echoes(via, first.port, 64 * 1024)).toBe(true);
  });

  it('counts a token’s ports across nodes', async () => {
    const echo = await startEcho();
    await tunnelTo(echo, node(0), { token: token(2) });
    await tunnelTo(echo, node(1), { token: token(2) });
    await expect(
      connectTcp({ target: echo, server: node(2).url, token: token(2), logger: silent }),
    ).rejects.toMatchObject({ edgeCode: 'TUNNEL2_ERR_TOO_MANY_TCP_PORTS' });
  });

  it('checks the allow-list on the holder with the real client address carried across the link', async () => {
    const { port } = await tunnelTo(await startEcho(), node(0), {
      token: token(6),
      allowIps: ['127.0.0.9/32'],
    });
    const refused = connectVia(node(1), port, '127.0.0.8');
    expect(await howItEnds(refused)).toBe('ECONNRESET');
    const allowed = connectVia(node(2), port, '127.0.0.9');
    await once(allowed, 'connect');
    const back = once(allowed, 'data');
    allowed.write('hello');
    expect(String((await back)[0])).toBe('hello');
    allowed.destroy();
    expect(
      await metric(node(0), 'tunnel2_tcp_connections_total{outcome="forbidden"}'),
    ).toBeGreaterThanOrEqual(1);
  });
});
