import type { IncomingHttpHeaders } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { createTestBackend } from '@tunnel2/test-backend';
import { type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, connectTcp, type Tunnel } from '../src/index.js';
import { CLUSTER_SECRET } from './support/cluster-harness.js';
import { h2c, h2Request } from './support/h2-client.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import { portRange, sendAndHash, startHashServer } from './support/tcp-stack.js';
import { startWsBackend, type WsBackend } from './support/ws-backend.js';
import { clientClose, clientFrame, FrameReader, OPCODE } from './support/ws-frames.js';

// `tunnel2 server --workers N` as a real process: N edge workers share the ports, agents and public
// connections land on any of them (the kernel spreads them with SO_REUSEPORT on Linux, node:cluster hands
// them out in turn elsewhere), and a request that lands
// on a worker other than its agent's crosses the node link to it (the answer then names the holder in
// x-tunnel2-node).

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/** The workers the primary said are listening (its info log), by index: pid and node id. */
function workersOf(edge: Spawned): Map<number, { pid: number; node: string }> {
  const workers = new Map<number, { pid: number; node: string }>();
  for (const line of edge.stderr().split('\n')) {
    if (!line.includes('"edge worker listening"')) continue;
    const entry = JSON.parse(line) as { worker: number; workerPid: number; node: string };
    workers.set(entry.worker, { pid: entry.workerPid, node: entry.node });
  }
  return workers;
}

async function startWorkersEdge(
  workers: number,
  extra: string[] = [],
): Promise<{ edge: Spawned; port: number; url: string; adminUrl: string }> {
  const edge = spawnCli([
    'server',
    '--workers',
    String(workers),
    '--port',
    '0',
    '--admin-port',
    '0',
    '--json',
    '--log-level',
    'info',
    ...extra,
  ]);
  const listening = await edge.waitFor('listening');
  expect(listening.workers).toBe(workers);
  // The workers' lines come on stderr, another pipe than the event's, and may be read after it.
  await until(() => workersOf(edge).size === workers, { what: 'every worker logged', timeoutMs: 10_000 });
  const url = String(listening.url);
  return { edge, url, port: Number(new URL(url).port), adminUrl: String(listening.adminUrl) };
}

/** The value of the sample of `metric` carrying every one of `labels`, 0 when there is none. */
function sampleOf(text: string, metric: string, ...labels: string[]): number {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${metric}{`) && labels.every((label) => line.includes(label)))
      return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

async function wsEcho(port: number, name: string, text: string): Promise<string> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, { headers: { host: `${name}.localhost` } });
  try {
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const answer = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
    ws.send(text);
    return await answer;
  } finally {
    ws.close();
  }
}

describe.each([2, 4])('tunnel2 server --workers %i', (workers) => {
  let edge: Spawned;
  let port: number;
  let url: string;
  let adminUrl: string;
  let backend: Backend;
  let wsBackend: WsBackend;
  let hashServer: Awaited<ReturnType<typeof startHashServer>>;
  const tunnels: Tunnel[] = [];
  /** At least two agents per worker on average, and until every worker holds one (see beforeAll). */
  const names: string[] = [];

  beforeAll(async () => {
    ({ edge, port, url, adminUrl } = await startWorkersEdge(workers, ['--tcp-ports', portRange(16)]));
    backend = await createTestBackend();
    wsBackend = await startWsBackend();
    hashServer = await startHashServer();
    // The kernel (SO_REUSEPORT) places each agent's connection by a hash, not in turn: agents are added
    // until every worker holds one (four agents on two workers all sit on one, one time in eight).
    const holders = new Set<string>();
    while (names.length < workers * 2 || (holders.size < workers && names.length < workers * 8)) {
      const name = `wk${workers}-${names.length}`;
      names.push(name);
      tunnels.push(await connect({ target: backend.port, server: url, subdomain: name, logger: silent }));
      const res = await send({ port, path: '/bytes/1', headers: ['Host', `${name}.localhost`] });
      holders.add(String(res.headers['x-tunnel2-node']));
    }
    tunnels.push(
      await connect({ target: wsBackend.port, server: url, subdomain: `ws${workers}`, logger: silent }),
    );
  }, 60_000);

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    if (edge !== undefined && edge.child.exitCode === null) {
      edge.kill('SIGKILL');
      await edge.exited;
    }
    await backend?.close();
    await wsBackend?.close();
    await hashServer?.close();
  });

  it('serves every name on every worker: agents sit on different workers, requests cross the node link', async () => {
    const nodes = new Set([...workersOf(edge).values()].map((w) => w.node));
    expect(nodes.size).toBe(workers);
    // x-tunnel2-node names the holder of the session (in cluster mode, same-node answers too).
    const holders = new Set<string>();
    const forwardedBy = async (): Promise<number[]> => {
      const text = await (await fetch(`${adminUrl}/metrics`)).text();
      return Array.from({ length: workers }, (_, i) =>
        sampleOf(text, 'tunnel2_cluster_forwarded_total', `worker="${i}"`, 'outcome="ok"'),
      );
    };
    // Rounds of one request per name until every worker has carried some (the kernel places each
    // connection by a hash, so a worker may miss a name's few connections by chance); at least two rounds.
    for (let round = 0; round < 2 || (round < 30 && (await forwardedBy()).includes(0)); round++) {
      for (const name of names) {
        // One connection per request, each placed on a worker of its own.
        const res = await send({ port, path: '/bytes/2000', headers: ['Host', `${name}.localhost`] });
        expect(res.status).toBe(200);
        expect(res.length).toBe(2000);
        const holder = String(res.headers['x-tunnel2-node']);
        expect(nodes.has(holder)).toBe(true);
        holders.add(holder);
      }
    }
    // Every name's holder answered; every worker took public requests and carried some to another
    // worker's agent over the node link.
    expect(holders.size).toBe(workers);
    for (const forwarded of await forwardedBy()) expect(forwarded).toBeGreaterThan(0);
  });

  it('serves HTTP/2 (h2c) from whichever worker takes the connection', async () => {
    for (let i = 0; i < workers + 1; i++) {
      const session = h2c(port);
      try {
        const answer = await h2Request(session, {
          ':method': 'GET',
          ':path': '/bytes/3000',
          ':authority': `${names[i % names.length]}.localhost`,
        });
        expect(answer.status).toBe(200);
        expect(answer.body.length).toBe(3000);
      } finally {
        session.close();
      }
    }
  });

  it('carries WebSockets to the agent from whichever worker takes the upgrade', async () => {
    for (let i = 0; i < workers + 1; i++) {
      expect(await wsEcho(port, `ws${workers}`, `hello ${i}`)).toBe(`hello ${i}`);
    }
  });

  it('carries RFC 8441 WebSockets (h2c extended CONNECT) from whichever worker takes the connection', async () => {
    // A connection each: the kernel places them over the workers, most away from the agent's.
    for (let i = 0; i < workers * 2; i++) {
      const session = h2c(port);
      try {
        await new Promise((resolve) => session.once('remoteSettings', resolve));
        const stream = session.request({
          ':method': 'CONNECT',
          ':protocol': 'websocket',
          ':scheme': 'http',
          ':path': '/echo',
          ':authority': `ws${workers}.localhost`,
          'sec-websocket-version': '13',
        });
        stream.on('error', () => {});
        const frames = new FrameReader();
        stream.on('data', (chunk: Buffer) => frames.push(chunk));
        const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
        expect(head[':status']).toBe(200);
        stream.write(clientFrame(OPCODE.text, `h2 hello ${i}`));
        const [echo] = await frames.next(1);
        expect(echo!.payload.toString()).toBe(`h2 hello ${i}`);
        stream.end(clientClose(1000));
      } finally {
        session.close();
      }
    }
  });

  it('carries a TCP tunnel from whichever worker takes the connection', async () => {
    const tunnel = await connectTcp({ target: hashServer.port, server: url, logger: silent });
    tunnels.push(tunnel);
    const tcpPort = tunnel.info?.tcp?.port ?? 0;
    expect(tcpPort).toBeGreaterThan(0);
    for (let i = 0; i < workers + 1; i++) {
      const { sent, answer } = await sendAndHash(tcpPort, 64 * 1024);
      expect(answer).toBe(sent);
    }
  });

  it('answers /metrics for the whole edge, each worker labelled', async () => {
    const res = await fetch(`${adminUrl}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    for (let i = 0; i < workers; i++) expect(text).toContain(`worker="${i}"`);
    // One family head per metric, whatever the number of workers.
    expect(text.match(/^# TYPE tunnel2_http_requests_total /gm)?.length).toBe(1);
    expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200);
  });

  it('drains every worker on SIGTERM: requests in flight on each finish, then it exits 0', async () => {
    const pids = [...workersOf(edge).values()].map((w) => w.pid);
    // Slow requests on fresh connections, so on every worker, some carried to another worker's agent.
    const slow = names.map((name) =>
      send({ port, path: '/loadtest/delay/1500', headers: ['Host', `${name}.localhost`], timeoutMs: 10_000 }),
    );
    // Every slow request has reached the backend (through its agent) before the signal: one still on its
    // way would rightly be refused by a draining worker.
    await until(() => backend.stats.inFlight >= names.length, {
      what: 'every slow request at the backend',
      timeoutMs: 10_000,
    });
    edge.kill('SIGTERM');
    for (const res of await Promise.all(slow)) expect(res.status).toBe(200);
    await edge.waitFor('stopped');
    expect(await edge.exited).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });
});

describe('tunnel2 server --workers 2 --registry redis:// (two such edges, as two machines)', () => {
  let redis: RedisServer;
  const edges: Array<{ edge: Spawned; port: number; url: string; adminUrl: string }> = [];
  let backend: Backend;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    for (let i = 0; i < 2; i++) {
      // Each edge's workers announce their link port at the host of its nodeUrl.
      const started = await startWorkersEdge(2, [
        '--registry',
        redis.url,
        '--node-id',
        `machine-${i}`,
        '--node-url',
        'http://127.0.0.1:1',
        '--cluster-secret',
        CLUSTER_SECRET,
      ]);
      edges.push(started);
    }
    backend = await createTestBackend();
    // At least four agents, and until they sit on both workers of machine-0: the kernel (SO_REUSEPORT)
    // places each connection by a hash, so four alone all land on one worker one time in eight.
    const seen = new Set<string>();
    while (tunnels.length < 4 || (seen.size < 2 && tunnels.length < 16)) {
      const name = `rd-${tunnels.length}`;
      tunnels.push(
        await connect({ target: backend.port, server: edges[0]?.url ?? '', subdomain: name, logger: silent }),
      );
      const res = await send({
        port: edges[0]?.port ?? 0,
        path: '/bytes/1',
        headers: ['Host', `${name}.localhost`],
      });
      seen.add(String(res.headers['x-tunnel2-node']));
    }
  }, 60_000);

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    for (const { edge } of edges) {
      edge.kill('SIGKILL');
      await edge.exited;
    }
    await backend?.close();
    await redis?.stop();
  });

  it("serves agents of one edge's workers from every worker of the other edge", async () => {
    const holders = new Set<string>();
    for (const { port } of edges) {
      for (let i = 0; i < tunnels.length; i++) {
        // Four connections a name: each worker of machine-1 takes some, whichever way they are spread.
        for (let k = 0; k < 4; k++) {
          const res = await send({ port, path: '/bytes/500', headers: ['Host', `rd-${i}.localhost`] });
          expect(res.status).toBe(200);
          expect(res.length).toBe(500);
          holders.add(String(res.headers['x-tunnel2-node']));
        }
      }
    }
    // The agents sit on both workers of machine-0, and machine-1 reaches each of them.
    expect([...holders].sort()).toEqual(['machine-0-w0', 'machine-0-w1']);
    const other = edges[1];
    const text = await (await fetch(`${other?.adminUrl}/metrics`)).text();
    for (const worker of ['0', '1'])
      expect(
        sampleOf(text, 'tunnel2_cluster_forwarded_total', `worker="${worker}"`, 'outcome="ok"'),
      ).toBeGreaterThan(0);
  });
});

describe('tunnel2 server --workers 2 that cannot start', () => {
  it('names the setting and exits 1 when the port is taken', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as AddressInfo).port;
    try {
      const edge = spawnCli([
        'server',
        '--workers',
        '2',
        '--port',
        String(taken),
        '--json',
        '--log-level',
        'info',
      ]);
      expect(await edge.exited).toBe(1);
      expect(edge.stderr()).toContain(`invalid setting port=${taken}: cannot listen on 127.0.0.1:${taken}`);
    } finally {
      holder.close();
    }
  });
});
