import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { ErrorCode } from '@tunnel2/protocol';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { createTunnels } from '../src/session/tunnel-group.js';
import { type CountingBackend, startCountingBackend } from './support/counting-backend.js';
import { hostileAgent } from './support/hostile-agent.js';
import { send } from './support/http-client.js';
import { startPlayedEdge } from './support/played-edge.js';
import { silent, until } from './support/stack.js';

// Several agents serving one name (`--replica`, PROTOCOL.md "Replicas"), in process: who may join, how
// requests and WebSockets spread, what the agents are told. The process-level faults (SIGTERM, kill -9,
// rolling restart under load) are in e2e-replicas-faults.test.ts.

let edge: Edge;
let port: number;
const backends: CountingBackend[] = [];
const tunnels: Tunnel[] = [];

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent, auth: { tokens: ['token-a', 'token-b'] } });
  ({ port } = await edge.listen());
  for (const id of ['r0', 'r1', 'r2']) backends.push(await startCountingBackend(id));
});

afterEach(async () => {
  await Promise.all(tunnels.splice(0).map((tunnel) => tunnel.close(0)));
  await until(() => edge.sessions.size === 0, { what: 'every session gone', timeoutMs: 5_000 });
});

afterAll(async () => {
  await edge.close(0);
  await Promise.all(backends.map((backend) => backend.close()));
});

async function agent(
  backend: CountingBackend,
  options: { name?: string; token?: string; replica?: boolean } = {},
): Promise<Tunnel> {
  const tunnel = await connect({
    target: backend.port,
    server: edge.url,
    subdomain: options.name ?? 'shop',
    token: options.token ?? 'token-a',
    replica: options.replica ?? true,
    inspect: false,
  });
  tunnels.push(tunnel);
  return tunnel;
}

function get(name = 'shop'): Promise<string> {
  return send({ port, path: '/', headers: ['Host', `${name}.localhost`], timeoutMs: 10_000 }).then((res) =>
    res.status === 200 ? res.body.toString() : `${res.status} ${res.headers['x-tunnel2-error']}`,
  );
}

describe('joining a name as a replica', () => {
  it('three agents with one token serve one name; each is told how many serve it when it connects', async () => {
    const atConnect: (number | undefined)[] = [];
    const a = await agent(backends[0]!);
    atConnect.push(a.info?.replicas);
    const b = await agent(backends[1]!);
    atConnect.push(b.info?.replicas);
    const c = await agent(backends[2]!);
    atConnect.push(c.info?.replicas);
    expect(atConnect).toEqual([1, 2, 3]);
    // Then each follows the joins (the live count: the next test).
    await until(() => a.info?.replicas === 3 && b.info?.replicas === 3, { what: 'told', timeoutMs: 5_000 });
    expect(edge.sessions.replicas('shop')).toHaveLength(3);
    expect(edge.sessions.size).toBe(3);
    expect(edge.sessions.names).toBe(1);
  });

  it("the inspector's status says how many agents served the name when this one connected", async () => {
    await agent(backends[0]!);
    const second = await connect({
      target: backends[1]!.port,
      server: edge.url,
      subdomain: 'shop',
      token: 'token-a',
      replica: true,
      inspect: { port: 0 },
    });
    tunnels.push(second);
    const status = (await (await fetch(`${second.inspectorUrl}/api/status`)).json()) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({ name: 'shop', replicas: 2 });
  });

  it('the count follows joins and leaves while connected (a NOTICE): the tunnel, its event and the inspector', async () => {
    const first = await connect({
      target: backends[0]!.port,
      server: edge.url,
      subdomain: 'shop',
      token: 'token-a',
      replica: true,
      inspect: { port: 0 },
    });
    tunnels.push(first);
    const counts: number[] = [];
    first.on('replicas', (count) => counts.push(count));
    const second = await agent(backends[1]!);
    await until(() => first.info?.replicas === 2, { what: 'told of the second', timeoutMs: 5_000 });
    const third = await agent(backends[2]!);
    await until(() => first.info?.replicas === 3 && second.info?.replicas === 3, {
      what: 'both told of the third',
      timeoutMs: 5_000,
    });
    await third.close(0);
    tunnels.splice(tunnels.indexOf(third), 1);
    await until(() => first.info?.replicas === 2 && second.info?.replicas === 2, {
      what: 'both told the third left',
      timeoutMs: 5_000,
    });
    expect(counts).toEqual([2, 3, 2]);
    const status = (await (await fetch(`${first.inspectorUrl}/api/status`)).json()) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({ name: 'shop', replicas: 2 });
  });

  it('without a token, the same agent key is the owner: its runs join as replicas; without --replica a second run is refused', async () => {
    const open = buildEdge({ port: 0, logger: silent });
    const { port: openPort } = await open.listen();
    const started: Tunnel[] = [];
    const run = (backend: CountingBackend, agentKey: string, replica: boolean) =>
      connect({
        target: backend.port,
        server: open.url,
        subdomain: 'shop',
        agentKey,
        replica,
        inspect: false,
      }).then((tunnel) => {
        started.push(tunnel);
        return tunnel;
      });
    try {
      await run(backends[0]!, 'key-a', true);
      const second = await run(backends[1]!, 'key-a', true);
      expect(second.info?.replicas).toBe(2);
      await expect(run(backends[2]!, 'key-b', true)).rejects.toMatchObject({ status: 409 });
      const seen = new Set<string>();
      for (let i = 0; i < 6; i++) {
        const res = await send({ port: openPort, path: '/', headers: ['Host', 'shop.localhost'] });
        seen.add(res.body.toString());
      }
      expect(seen).toEqual(new Set(['r0', 'r1']));
      await Promise.all(started.splice(0).map((tunnel) => tunnel.close(0)));
      await until(() => open.sessions.size === 0, { what: 'both gone', timeoutMs: 5_000 });
      // Today's rule for a token-less owner without --replica: another run of the same key is refused.
      await run(backends[0]!, 'key-a', false);
      await expect(run(backends[1]!, 'key-a', false)).rejects.toMatchObject({
        status: 409,
        message: expect.stringContaining('another tunnel2 run of yours'),
      });
    } finally {
      await Promise.all(started.map((tunnel) => tunnel.close(0)));
      await open.close(0);
    }
  });

  it('another owner can never join: 409 NAME_IN_USE, with or without --replica', async () => {
    await agent(backends[0]!);
    for (const replica of [true, false]) {
      await expect(agent(backends[1]!, { token: 'token-b', replica })).rejects.toMatchObject({
        status: 409,
        edgeCode: 'TUNNEL2_ERR_NAME_IN_USE',
        fatal: true,
      });
    }
    expect(edge.sessions.replicas('shop')).toHaveLength(1);
  });

  it('a holder without --replica keeps the name to itself: a replica of another owner gets 409', async () => {
    const holder = await agent(backends[0]!, { replica: false });
    await expect(agent(backends[1]!, { token: 'token-b' })).rejects.toMatchObject({
      status: 409,
      edgeCode: 'TUNNEL2_ERR_NAME_IN_USE',
    });
    expect(edge.sessions.replicas('shop')).toEqual([expect.objectContaining({ replica: false })]);
    expect(holder.info?.replicas).toBeUndefined();
    expect(await get()).toBe('r0');
  });

  it('a holder without --replica: its own token takes the name over as before (no second agent beside it)', async () => {
    const first = await agent(backends[0]!, { replica: false });
    const closed = once(first, 'error');
    await agent(backends[1]!);
    const [error] = (await closed) as [{ code: string }];
    expect(error.code).toBe('TUNNEL2_ERR_REPLACED');
    expect(edge.sessions.replicas('shop')).toHaveLength(1);
    expect(await get()).toBe('r1');
  });

  it('the name stays claimed while one replica lives, and is free once the last one leaves', async () => {
    const a = await agent(backends[0]!);
    const b = await agent(backends[1]!);
    await a.close(0);
    tunnels.splice(tunnels.indexOf(a), 1);
    await until(() => edge.sessions.replicas('shop').length === 1, { what: 'a gone', timeoutMs: 5_000 });
    await expect(agent(backends[2]!, { token: 'token-b' })).rejects.toMatchObject({ status: 409 });
    expect(await get()).toBe('r1');
    await b.close(0);
    tunnels.splice(tunnels.indexOf(b), 1);
    await until(() => edge.sessions.size === 0, { what: 'b gone', timeoutMs: 5_000 });
    // A graceful close frees the name at once: another owner may have it now.
    const other = await agent(backends[2]!, { token: 'token-b' });
    expect(other.info?.name).toBe('shop');
  });

  it('--replica needs a subdomain, or for TCP a fixed public port', async () => {
    await expect(connect({ target: 1, server: edge.url, replica: true })).rejects.toMatchObject({
      code: 'TUNNEL2_ERR_INVALID_OPTION',
      message: expect.stringContaining('--replica needs --subdomain'),
    });
    await expect(
      connect({ target: 1, server: edge.url, subdomain: 'x', replica: true, tcp: { remotePort: undefined } }),
    ).rejects.toMatchObject({ message: expect.stringContaining('--replica needs --remote-port') });
  });
});

describe('balancing over the replicas', () => {
  it('requests spread over all three (least outstanding, ties round robin): each gets at least 20 %', async () => {
    for (const backend of backends) await agent(backend);
    const before = backends.map((backend) => backend.requests);
    const answers: string[] = [];
    // 300 requests, 12 at a time.
    let next = 0;
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        while (next < 300) {
          next++;
          answers.push(await get());
        }
      }),
    );
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    const served = backends.map((backend, i) => backend.requests - (before[i] ?? 0));
    for (const count of served) expect(count).toBeGreaterThanOrEqual(60);
  });

  it('WebSockets are balanced per connection: six upgrades reach all three backends', async () => {
    for (const backend of backends) await agent(backend);
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Host: 'shop.localhost' } });
      const [data] = (await once(ws, 'message')) as [Buffer];
      seen.push(data.toString());
      ws.close();
      await once(ws, 'close');
    }
    expect(new Set(seen)).toEqual(new Set(['r0', 'r1', 'r2']));
  });

  it('a replica that leaves gracefully under load loses nothing: the others take the new requests', async () => {
    const leaving = await agent(backends[0]!);
    await agent(backends[1]!);
    await agent(backends[2]!);
    const answers: string[] = [];
    let stop = false;
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!stop) answers.push(await get());
      }),
    );
    await until(() => answers.length >= 60, { what: 'some load served', timeoutMs: 10_000 });
    await leaving.close(5_000);
    tunnels.splice(tunnels.indexOf(leaving), 1);
    const after = answers.length;
    await until(() => answers.length >= after + 60, { what: 'load after the leave', timeoutMs: 10_000 });
    stop = true;
    await load;
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    expect(answers.slice(after + 10)).not.toContain('r0');
  });
});

describe('a request a replica refused before running it', () => {
  it('goes to another replica when it has no body; one with a body is answered as before, not sent twice', async () => {
    let refused = 0;
    // A replica that refuses every stream (REFUSED_STREAM: it never ran the request), as one too busy or
    // caught between its GOAWAY and the edge reading it.
    const closeRefuser = await hostileAgent(
      edge.url,
      'shop',
      (stream) => {
        refused++;
        stream.reset(ErrorCode.REFUSED_STREAM);
      },
      {},
      { query: '&replica=1', headers: { authorization: 'Bearer token-a' } },
    );
    try {
      await agent(backends[0]!);
      await until(() => edge.sessions.replicas('shop').length === 2, {
        what: 'two replicas',
        timeoutMs: 5_000,
      });
      const answers: string[] = [];
      for (let i = 0; i < 20; i++) answers.push(await get());
      expect(answers).toEqual(Array.from({ length: 20 }, () => 'r0'));
      expect(refused).toBeGreaterThan(0);
      const posts: number[] = [];
      for (let i = 0; i < 20; i++) {
        const res = await send({
          port,
          path: '/',
          method: 'POST',
          headers: ['Host', 'shop.localhost', 'Content-Length', '2'],
          body: Buffer.from('hi'),
          timeoutMs: 10_000,
        });
        posts.push(res.status);
      }
      expect(posts).toContain(200);
      expect(posts.filter((status) => status !== 200).every((status) => status === 503)).toBe(true);
      expect(posts.filter((status) => status !== 200).length).toBeGreaterThan(0);
    } finally {
      closeRefuser();
    }
  });
});

describe("the edge's NOTICEs as a replica's agent reads them", () => {
  it('reports a count only when it changed: repeated or unusable NOTICEs print nothing', async () => {
    const played = await startPlayedEdge((_hello, session) => {
      session.sendHello({ name: 'shop', url: 'http://shop.example/', urls: [], replicas: 1 }, true);
      // Once the test listens (connect resolves at the HELLO answer).
      setTimeout(() => {
        for (const count of [1, 2, 2, 2, 0, -1, 1.5, 'x', 3, 3]) session.sendNotice({ replicas: count });
      }, 300);
    });
    const tunnel = await connect({
      target: 1,
      server: played.url,
      subdomain: 'shop',
      replica: true,
      inspect: false,
    });
    tunnels.push(tunnel);
    const counts: number[] = [];
    tunnel.on('replicas', (count) => counts.push(count));
    try {
      await until(() => tunnel.info?.replicas === 3, { what: 'the last NOTICE', timeoutMs: 5_000 });
      expect(counts).toEqual([2, 3]);
    } finally {
      await played.close();
    }
  });
});

describe('where replicas are not to be had', () => {
  it('an edge older than replicas (no `replicas` in its HELLO answer): the agent stops, saying so', async () => {
    const played = await startPlayedEdge((_hello, session) =>
      session.sendHello({ name: 'shop', url: 'http://shop.example/', urls: [] }, true),
    );
    try {
      await expect(
        connect({ target: 1, server: played.url, subdomain: 'shop', replica: true, inspect: false }),
      ).rejects.toMatchObject({
        code: 'TUNNEL2_ERR_REPLICAS_UNSUPPORTED',
        fatal: true,
        message: expect.stringContaining('this edge does not support replicas'),
      });
    } finally {
      await played.close();
    }
  });

  it('the edge refuses replica=1 for a TCP tunnel on any port with a 400 naming why (replicas share a fixed one)', async () => {
    const ws = new WebSocket(
      `${edge.url.replace('http', 'ws')}/_tunnel2/connect?name=shop&tcp=any&replica=1`,
      {
        headers: { authorization: 'Bearer token-a' },
      },
    );
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, IncomingMessage];
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    expect(res.statusCode).toBe(400);
    expect(Buffer.concat(chunks).toString()).toContain(
      'a TCP replica (--replica) shares a fixed public port',
    );
  });

  it("a config file: the replica tunnel leads its session (the edge joins only a session's own name)", () => {
    const tunnel = createTunnels({
      server: 'http://127.0.0.1:1',
      tunnels: [
        { name: 'web', target: 1, subdomain: 'web' },
        { name: 'shop', target: 2, subdomain: 'shop', replica: true },
      ],
    });
    expect(tunnel.tunnels.map((t) => t.label)).toEqual(['shop', 'web']);
    expect(() =>
      createTunnels({
        server: 'http://127.0.0.1:1',
        tunnels: [
          { name: 'a', target: 1, subdomain: 'a', replica: true },
          { name: 'b', target: 2, subdomain: 'b', replica: true },
        ],
      }),
    ).toThrow(/one session carries at most one replica/);
  });
});
