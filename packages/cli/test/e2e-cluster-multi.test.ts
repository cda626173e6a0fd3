// tunnel2 start in cluster mode: one agent session on one node carries several tunnels, and each answers on
// every node. Two real `tunnel2 server` processes share a real redis-server, each on its own loopback
// address so both can listen on the whole TCP range (as nodes on two hosts would).
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clusterNodeArgs, freePort, type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectMany } from '../src/index.js';
import { CLUSTER_SECRET } from './support/cluster-harness.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';
import { portRange, sendAndHash, startHashServer } from './support/tcp-stack.js';

const RANGE = portRange(8);
const TOKEN = 'token-cluster-multi';
let redis: RedisServer;
const nodes: { host: string; url: string; edge: Spawned }[] = [];
const cleanups: (() => unknown)[] = [];

async function startNode(i: number) {
  const host = `127.0.0.${i + 1}`;
  const port = await freePort();
  const edge = spawnCli([
    'server',
    '--json',
    ...clusterNodeArgs({ redisUrl: redis.url, id: `node-${i}`, port, secret: CLUSTER_SECRET, host }),
    '--admin-port',
    String(await freePort()),
    '--tcp-ports',
    RANGE,
    '--token',
    TOKEN,
  ]);
  await edge.waitFor('listening');
  return { host, url: `http://${host}:${port}`, edge };
}

beforeAll(async () => {
  redis = await startRedisServer();
  for (let i = 0; i < 2; i++) nodes.push(await startNode(i));
}, 60_000);

afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const node of nodes) {
    node.edge.kill('SIGKILL');
    await node.edge.exited;
  }
  await redis?.stop();
});

async function labelled(label: string): Promise<number> {
  const server: Server = createServer((req, res) => res.end(`${label} ${req.url}`));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

it('the listed tunnels of a session on node 0 answer through node 1: both names, and the TCP port', async () => {
  const [home, other] = nodes;
  if (home === undefined || other === undefined) throw new Error('two nodes');
  const hash = await startHashServer();
  cleanups.push(hash.close);
  const group = await connectMany({
    server: home.url,
    token: TOKEN,
    logger: silent,
    tunnels: [
      { name: 'web', target: await labelled('web'), subdomain: 'cm-web', inspect: false },
      { name: 'api', target: await labelled('api'), subdomain: 'cm-api', inspect: false },
      { name: 'db', target: hash.port, tcp: {} },
    ],
  });
  cleanups.push(() => group.close(0));
  const get = async (name: string) => (await fetch(`${other.url}/session/${name}/x`)).text();
  expect(await get('cm-web')).toBe('web /x');
  expect(await get('cm-api')).toBe('api /x');
  const port = group.tunnels[2]?.info?.tcp?.port ?? 0;
  const { sent, answer } = await sendAndHash(port, 64 * 1024, other.host);
  expect(answer).toBe(sent);
});
