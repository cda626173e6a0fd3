import { once } from 'node:events';
import type { Edge } from '@tunnel2/edge';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { type CountingBackend, startCountingBackend } from './support/counting-backend.js';
import { send } from './support/http-client.js';
import { until } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

// Replicas (`--replica`) across the nodes of a cluster, in process: two nodes on one memory registry,
// agents of one owner on both. Each node holds its place in the name's replica set; a node balances its
// own replicas and the other holders by the requests it has outstanding on each. The process-level
// faults (HAProxy, redis-server, SIGTERM, kill -9, --workers) are in e2e-cluster-replicas-faults.test.ts.

let a: Edge;
let b: Edge;
let portA: number;
let portB: number;
const backends: CountingBackend[] = [];
const tunnels: Tunnel[] = [];

beforeAll(async () => {
  ({ a, b, portA } = await twoNodes({
    a: { auth: { tokens: ['token-a', 'token-b'] } },
    b: { auth: { tokens: ['token-a', 'token-b'] } },
  }));
  portB = Number(new URL(b.url).port);
  for (const id of ['r0', 'r1', 'r2']) backends.push(await startCountingBackend(id));
});

afterEach(async () => {
  await Promise.all(tunnels.splice(0).map((tunnel) => tunnel.close(0)));
  await until(() => a.sessions.size === 0 && b.sessions.size === 0, {
    what: 'every session gone',
    timeoutMs: 5_000,
  });
});

afterAll(async () => {
  await b?.close(0);
  await a?.close(0);
  await Promise.all(backends.map((backend) => backend.close()));
});

async function agent(
  node: Edge,
  backend: CountingBackend,
  options: { token?: string; replica?: boolean } = {},
): Promise<Tunnel> {
  const tunnel = await connect({
    target: backend.port,
    server: node.url,
    subdomain: 'shop',
    token: options.token ?? 'token-a',
    replica: options.replica ?? true,
    inspect: false,
  });
  tunnels.push(tunnel);
  return tunnel;
}

function get(port: number): Promise<string> {
  return send({ port, path: '/', headers: ['Host', 'shop.localhost'], timeoutMs: 10_000 }).then((res) =>
    res.status === 200
      ? res.body.toString()
      : `${res.status} ${res.headers['x-tunnel2-error']} via ${res.headers['x-tunnel2-node']}`,
  );
}

/** `total` requests, `parallel` at a time, through `ports` in turn; the answers in order of arrival. */
async function load(ports: number[], total: number, parallel: number): Promise<string[]> {
  const answers: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < total) {
        const port = ports[next % ports.length] as number;
        next++;
        answers.push(await get(port));
      }
    }),
  );
  return answers;
}

/** Asks through `port` until the answer is `expected` (a takeover reaches every node within a few tries). */
async function answers(port: number, expected: string): Promise<string[]> {
  const seen: string[] = [];
  const deadline = performance.now() + 5_000;
  while (performance.now() < deadline) {
    const answer = await get(port);
    seen.push(answer);
    if (answer === expected) return seen;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`no ${expected} through port ${port} within 5 s: ${seen.join(', ')}`);
}

function shares(answers: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const answer of answers) counts[answer] = (counts[answer] ?? 0) + 1;
  return counts;
}

describe('replicas on two nodes of a cluster', () => {
  it('agents of one owner on both nodes join the name: each node holds its place in the replica set', async () => {
    await agent(a, backends[0]!);
    await agent(b, backends[1]!);
    await agent(b, backends[2]!);
    const set = await (
      a.options.registry as unknown as {
        lookupReplicas(name: string): Promise<{ holders: { nodeId: string }[] } | undefined>;
      }
    ).lookupReplicas('shop');
    expect(set?.holders.map((holder) => holder.nodeId)).toEqual(['node-a', 'node-b']);
    expect(a.sessions.replicas('shop')).toHaveLength(1);
    expect(b.sessions.replicas('shop')).toHaveLength(2);
  });

  it('each agent is told how many serve the name across the nodes, as they join and leave', async () => {
    const first = await agent(a, backends[0]!);
    const second = await agent(b, backends[1]!);
    // Node A hears of B's place at its next renewal round (a third of the lease).
    await until(() => first.info?.replicas === 2 && second.info?.replicas === 2, {
      what: 'both told of the other node',
      timeoutMs: 10_000,
    });
    await second.close(0);
    tunnels.splice(tunnels.indexOf(second), 1);
    await until(() => first.info?.replicas === 1, { what: 'A told B left', timeoutMs: 10_000 });
  });

  it('another owner gets 409 on either node, with or without --replica', async () => {
    await agent(a, backends[0]!);
    for (const node of [a, b])
      for (const replica of [true, false])
        await expect(agent(node, backends[1]!, { token: 'token-b', replica })).rejects.toMatchObject({
          status: 409,
          edgeCode: 'TUNNEL2_ERR_NAME_IN_USE',
        });
  });

  it('requests through either node spread over the replicas of both (each at least 20 %)', async () => {
    await agent(a, backends[0]!);
    await agent(b, backends[1]!);
    await agent(b, backends[2]!);
    const answers = await load([portA, portB], 300, 12);
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    const counts = shares(answers);
    for (const id of ['r0', 'r1', 'r2']) expect(counts[id] ?? 0).toBeGreaterThanOrEqual(60);
  });

  it('a node that holds no replica forwards to the holders, balanced: a node without one spreads too', async () => {
    await agent(b, backends[0]!);
    await agent(b, backends[1]!);
    const answers = await load([portA], 200, 8);
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    const counts = shares(answers);
    for (const id of ['r0', 'r1']) expect(counts[id] ?? 0).toBeGreaterThanOrEqual(40);
  });

  it('WebSockets are balanced per connection across the nodes', async () => {
    await agent(a, backends[0]!);
    await agent(b, backends[1]!);
    const seen = new Set<string>();
    for (let i = 0; i < 8 && seen.size < 2; i++) {
      const ws = new WebSocket(`ws://127.0.0.1:${portA}/`, { headers: { Host: 'shop.localhost' } });
      const [data] = (await once(ws, 'message')) as [Buffer];
      seen.add(data.toString());
      ws.close();
      await once(ws, 'close');
    }
    expect(seen).toEqual(new Set(['r0', 'r1']));
  });

  it('a replica that leaves gracefully under load loses nothing; the other node stops choosing it', async () => {
    const leaving = await agent(a, backends[0]!);
    await agent(b, backends[1]!);
    const answers: string[] = [];
    let stop = false;
    const running = Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        while (!stop) answers.push(await get(i % 2 === 0 ? portA : portB));
      }),
    );
    await until(() => answers.length >= 60, { what: 'some load served', timeoutMs: 10_000 });
    await leaving.close(5_000);
    tunnels.splice(tunnels.indexOf(leaving), 1);
    const after = answers.length;
    await until(() => answers.length >= after + 100, { what: 'load after the leave', timeoutMs: 15_000 });
    stop = true;
    await running;
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    expect(answers.slice(after + 10)).not.toContain('r0');
  });

  it('the name stays claimed while a replica lives on either node, and is free once the last leaves', async () => {
    const first = await agent(a, backends[0]!);
    const second = await agent(b, backends[1]!);
    await first.close(0);
    tunnels.splice(tunnels.indexOf(first), 1);
    await until(() => a.sessions.size === 0, { what: 'first gone', timeoutMs: 5_000 });
    await expect(agent(a, backends[2]!, { token: 'token-b' })).rejects.toMatchObject({ status: 409 });
    expect(await get(portA)).toBe('r1');
    await second.close(0);
    tunnels.splice(tunnels.indexOf(second), 1);
    await until(() => b.sessions.size === 0, { what: 'second gone', timeoutMs: 5_000 });
    const other = await agent(a, backends[2]!, { token: 'token-b' });
    expect(other.info?.name).toBe('shop');
  });

  it('a holder without --replica on one node: a replica of its token on the other takes the name over', async () => {
    const first = await agent(a, backends[0]!, { replica: false });
    const closed = once(first, 'error');
    await agent(b, backends[1]!);
    const [error] = (await closed) as [{ code: string }];
    expect(error.code).toBe('TUNNEL2_ERR_REPLACED');
    tunnels.splice(tunnels.indexOf(first), 1);
    expect(await answers(portA, 'r1')).toContain('r1');
  });

  it('replicas on both nodes: an agent of their token without --replica takes the name over from all', async () => {
    const r0 = await agent(a, backends[0]!);
    const r1 = await agent(b, backends[1]!);
    const closed = [once(r0, 'error'), once(r1, 'error')];
    await agent(b, backends[2]!, { replica: false });
    for (const error of await Promise.all(closed))
      expect((error as [{ code: string }])[0].code).toBe('TUNNEL2_ERR_REPLACED');
    tunnels.splice(tunnels.indexOf(r0), 1);
    tunnels.splice(tunnels.indexOf(r1), 1);
    expect(await answers(portA, 'r2')).toContain('r2');
    expect(await get(portB)).toBe('r2');
  });
});

describe('an agent going away with a request with a body waiting for it, across the link', () => {
  it.each([
    ['a replica', true],
    ['an agent without --replica', false],
  ])(
    '%s: answers 503 busy as one edge does (the request never ran; it cannot be sent again), not 502 offline',
    async (_what, replica) => {
      // Node B: one stream per session, so the second request waits for a slot there.
      const pair = await twoNodes({
        a: { auth: { tokens: ['token-a'] } },
        b: { auth: { tokens: ['token-a'] }, maxStreamsPerSession: 1, streamWaitMs: 10_000 },
      });
      const slow = await startCountingBackend('slow', 1_500);
      try {
        const tunnel = await connect({
          target: slow.port,
          server: pair.b.url,
          subdomain: 'shop',
          token: 'token-a',
          replica,
          inspect: false,
        });
        const portB2 = Number(new URL(pair.b.url).port);
        // The slot on B is taken by a slow request; a POST through A (no replica there) waits for it on B.
        const first = send({
          port: portB2,
          path: '/',
          headers: ['Host', 'shop.localhost'],
          timeoutMs: 10_000,
        });
        await new Promise((resolve) => setTimeout(resolve, 300));
        const post = send({
          port: pair.portA,
          method: 'POST',
          path: '/',
          headers: ['Host', 'shop.localhost', 'Content-Type', 'text/plain'],
          body: Buffer.from('hello'),
          timeoutMs: 10_000,
        });
        await new Promise((resolve) => setTimeout(resolve, 300));
        // The agent leaves gracefully (GOAWAY): the waiting POST never ran and cannot be carried elsewhere.
        const closing = tunnel.close(5_000);
        const res = await post;
        expect(`${res.status} ${res.headers['x-tunnel2-error']}`).toBe('503 TUNNEL2_ERR_TUNNEL_BUSY');
        expect((await first).status).toBe(200);
        await closing;
      } finally {
        await slow.close();
        await pair.b.close(0);
        await pair.a.close(0);
      }
    },
  );
});
