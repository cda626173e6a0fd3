import { once } from 'node:events';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { freePort, type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET } from './support/cluster-harness.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { howItEnds } from './support/tcp-stack.js';

// TCP replicas across a cluster: two real `tunnel2 server` nodes sharing a real redis-server (each on its
// own loopback address, so both listen on the same public port as two hosts would), and one real agent
// process `tunnel2 tcp … --remote-port P --replica` on each node, each in front of a backend that greets
// every connection with its id and then echoes. The port is a replica set of both nodes: a connection to
// either node goes to its local replica or is carried to the other holder, by the fewest connections open.
// Then `tunnel2 server --workers 2`, where each worker is a node and the workers share the public port.

const TOKEN = 'token-a';
const IDS = ['r0', 'r1'];

interface Node {
  host: string;
  url: string;
  edge: Spawned;
}

let redis: RedisServer;
let publicPort: number;
const nodes: Node[] = [];
const backends: Server[] = [];
const agents: Spawned[] = [];
const opened: Socket[] = [];

async function startGreetingBackend(id: string): Promise<number> {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.write(`${id}\n`);
    socket.pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  backends.push(server);
  return (server.address() as { port: number }).port;
}

async function startNode(i: number): Promise<Node> {
  const host = `127.0.0.${i + 1}`;
  const port = await freePort();
  const edge = spawnCli([
    'server',
    '--json',
    '--host',
    host,
    '--port',
    String(port),
    '--admin-port',
    String(await freePort()),
    '--registry',
    redis.url,
    '--node-id',
    `node-${i}`,
    '--node-url',
    `http://${host}:${port}`,
    '--cluster-secret',
    CLUSTER_SECRET,
    '--tcp-ports',
    `${publicPort}-${publicPort}`,
    '--token',
    TOKEN,
    '--token',
    'token-b',
  ]);
  await edge.waitFor('listening');
  return { host, url: `http://${host}:${port}`, edge };
}

function node0(): Node {
  const found = nodes[0];
  if (found === undefined) throw new Error('no node 0');
  return found;
}

function replicaAgent(backendPort: number, server: string, token = TOKEN): Spawned {
  const agent = spawnCli([
    'tcp',
    String(backendPort),
    '--json',
    '--token',
    token,
    '--server',
    server,
    '--remote-port',
    String(publicPort),
    '--replica',
  ]);
  agents.push(agent);
  return agent;
}

/** Opens a public connection to `host` and resolves with it and the id of the backend that greeted it. */
async function openPublic(host: string): Promise<{ socket: Socket; id: string }> {
  const socket = netConnect({ port: publicPort, host });
  opened.push(socket);
  socket.on('error', () => {});
  socket.setEncoding('utf8');
  let text = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: string): void => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      resolve({ socket, id: text.slice(0, end) });
    };
    const onClose = (): void => reject(new Error(`connection to ${host} closed before its greeting`));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** The socket still carries bytes both ways (its backend echoes them). */
async function echoes(socket: Socket): Promise<boolean> {
  const word = `ping-${Math.random()}`;
  socket.write(word);
  let text = '';
  return new Promise((resolve) => {
    const onData = (chunk: string): void => {
      text += chunk;
      if (!text.includes(word)) return;
      socket.off('data', onData);
      resolve(true);
    };
    socket.on('data', onData);
    socket.once('close', () => resolve(false));
  });
}

afterAll(async () => {
  for (const socket of opened) socket.destroy();
  for (const agent of agents) if (agent.child.exitCode === null) agent.kill('SIGKILL');
  await Promise.all(agents.map((agent) => agent.exited));
  for (const node of nodes) {
    node.edge.kill('SIGKILL');
    await node.edge.exited;
  }
  for (const server of backends) server.close();
  await redis?.stop();
});

describe('TCP replicas in a cluster (two nodes, redis registry)', () => {
  beforeAll(async () => {
    publicPort = await freePort();
    redis = await startRedisServer();
    for (let i = 0; i < 2; i++) nodes.push(await startNode(i));
    for (const [i, id] of IDS.entries()) {
      const agent = replicaAgent(await startGreetingBackend(id), nodes[i]?.url ?? '');
      await agent.waitFor('ready');
    }
  }, 60_000);

  it('30 connections through both nodes spread over both replicas; a kill -9 resets only its own, new ones go to the other', async () => {
    const hosts = nodes.map((node) => node.host);
    const first: { socket: Socket; id: string }[] = [];
    for (let i = 0; i < 30; i++) first.push(await openPublic(hosts[i % 2] ?? ''));
    const counts = Object.fromEntries(IDS.map((id) => [id, first.filter((c) => c.id === id).length]));
    // Each node balances its own connections by the fewest open from it: neither replica is left out.
    for (const id of IDS) expect(counts[id], JSON.stringify(counts)).toBeGreaterThanOrEqual(6);
    for (const c of first.slice(0, 4)) expect(await echoes(c.socket)).toBe(true);

    const onVictim = first.filter((c) => c.id === 'r0');
    const onOther = first.filter((c) => c.id === 'r1');
    const endings = onVictim.map((c) => howItEnds(c.socket));
    agents[0]?.kill('SIGKILL');
    await agents[0]?.exited;
    expect(new Set(await Promise.all(endings))).toEqual(new Set(['ECONNRESET']));
    for (const c of onOther) expect(await echoes(c.socket)).toBe(true);

    const later: { socket: Socket; id: string }[] = [];
    for (let i = 0; i < 10; i++) later.push(await openPublic(hosts[i % 2] ?? ''));
    expect(later.map((c) => c.id)).toEqual(later.map(() => 'r1'));
    for (const c of later.slice(0, 2)) expect(await echoes(c.socket)).toBe(true);
  }, 60_000);

  it('a draining replica (SIGTERM) gets no new connection through either node; its open one carries on', async () => {
    const r2 = replicaAgent(await startGreetingBackend('r2'), node0().url);
    await r2.waitFor('ready');
    // Through its node, which counts its own replica as one holder with nothing open from it yet.
    let onR2: Socket | undefined;
    for (let i = 0; i < 20 && onR2 === undefined; i++) {
      const c = await openPublic(node0().host);
      if (c.id === 'r2') onR2 = c.socket;
    }
    if (onR2 === undefined) throw new Error('no connection reached the new replica');
    r2.kill('SIGTERM');
    await r2.waitFor('finishing');
    // Until its node has read the GOAWAY, a connection the agent refuses before taking it is reset (the
    // node's only replica of the port refused it, and a refusal is retried on that node's replicas only:
    // docs/scaling.md "Replicas"); then every new one goes to r1.
    let probe = '';
    for (let i = 0; i < 50 && probe !== 'r1'; i++)
      probe = (await openPublic(node0().host).catch(() => ({ id: '' }))).id;
    expect(probe).toBe('r1');
    const later: string[] = [];
    for (let i = 0; i < 10; i++) later.push((await openPublic(nodes[i % 2]?.host ?? '')).id);
    expect(later).toEqual(later.map(() => 'r1'));
    expect(await echoes(onR2)).toBe(true);
    onR2.end();
    expect(await r2.exited).toBe(0);
  }, 60_000);

  it('another token cannot join the port on either node, with or without --replica', async () => {
    for (const node of nodes)
      for (const asReplica of [true, false]) {
        const args = ['tcp', '1', '--json', '--token', 'token-b', '--server', node.url];
        const intruder = spawnCli([
          ...args,
          '--remote-port',
          String(publicPort),
          ...(asReplica ? ['--replica'] : []),
        ]);
        agents.push(intruder);
        expect(await intruder.exited).not.toBe(0);
        expect(JSON.stringify(intruder.events)).toContain(`port ${publicPort} is in use by another agent`);
      }
  }, 60_000);
});

describe('TCP replicas on `tunnel2 server --workers 2`', () => {
  let edge: Spawned | undefined;
  let workersPort: number;

  afterAll(async () => {
    if (edge !== undefined && edge.child.exitCode === null) {
      edge.kill('SIGKILL');
      await edge.exited;
    }
  });

  it('two replicas share the workers public port: connections reach both', async () => {
    workersPort = await freePort();
    const tcpRange = `${workersPort}-${workersPort}`;
    edge = spawnCli([
      'server',
      '--workers',
      '2',
      '--port',
      '0',
      '--json',
      '--token',
      TOKEN,
      '--tcp-ports',
      tcpRange,
    ]);
    const url = String((await edge.waitFor('listening')).url);
    const ports = [await startGreetingBackend('w0'), await startGreetingBackend('w1')];
    const started = ports.map((port) =>
      spawnCli([
        'tcp',
        String(port),
        '--json',
        '--token',
        TOKEN,
        '--server',
        url,
        '--remote-port',
        tcpRange.split('-')[0] ?? '',
        '--replica',
      ]),
    );
    agents.push(...started);
    for (const agent of started) await agent.waitFor('ready');
    const ids = new Set<string>();
    for (let i = 0; i < 20 && ids.size < 2; i++) {
      const socket = netConnect({ port: workersPort, host: '127.0.0.1' });
      opened.push(socket);
      socket.on('error', () => {});
      socket.setEncoding('utf8');
      const [greeting] = (await once(socket, 'data')) as [string];
      ids.add(greeting.trim());
    }
    expect([...ids].sort()).toEqual(['w0', 'w1']);
  }, 60_000);
});
