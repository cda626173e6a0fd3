import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { ErrorCode, encodeHello, FrameType, parseGoAway, resolveSettings } from '@tunnel2/protocol';
import { createTestBackend } from '@tunnel2/test-backend';
import { startRedisServer } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { NodeAuth } from '../../edge/src/cluster/node-auth.js';
import { createRedisRegistry } from '../../registry/src/redis-registry.js';
import type { SessionRegistry } from '../../registry/src/session-registry.js';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

// Issue #29, defect 6: a node-link upgrade captured on the way must open no second link, at the same node
// or another, and whoever can write the registry without the cluster secret must not be able to point a
// node's links (and with them forwarded requests) at an address of their choosing.

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const LINK_PATH = '/_tunnel2/node-link';
const AUTH_HEADER = 'x-tunnel2-node-auth';

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function portOf(edge: Edge): number {
  return Number(new URL(edge.url).port);
}

function node(nodeId: string, options: Partial<EdgeOptions>): Edge {
  const edge = buildEdge({ port: 0, logger: silent, nodeId, cluster: { secret: SECRET }, ...options });
  cleanups.push(() => edge.close(0));
  return edge;
}

/** The answer to a link upgrade sent with exactly these headers, as a status code (101 when it opened). */
function linkUpgrade(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${LINK_PATH}`, { headers, perMessageDeflate: false });
    ws.once('unexpected-response', (req, res: IncomingMessage) => {
      res.resume();
      req.destroy();
      resolve(res.statusCode ?? 0);
    });
    ws.once('open', () => {
      ws.terminate();
      resolve(101);
    });
    ws.once('error', reject);
  });
}

/** A listener standing for an attacker's host: it counts the connections it gets and keeps none. */
async function countingListener(): Promise<{ server: Server; url: string; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket: Socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  const { port } = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${port}`, connections: () => connections };
}

describe('a captured node-link upgrade', () => {
  let a: Edge;
  let b: Edge;
  let c: Edge;
  const captured: { value: string; host: string }[] = [];

  beforeAll(async () => {
    a = node('node-a', {});
    b = node('node-b', { registry: a.options.registry });
    c = node('node-c', { registry: a.options.registry });
    await a.listen();
    await b.listen();
    await c.listen();
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const tunnel: Tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
    cleanups.push(() => tunnel.close(0));
    // What someone on the path between A and B sees: the upgrade's headers.
    b.app.server.on('upgrade', (req: IncomingMessage) => {
      const value = req.headers[AUTH_HEADER];
      if (req.url === LINK_PATH && typeof value === 'string')
        captured.push({ value, host: req.headers.host ?? '' });
    });
    const answer = await send({
      port: portOf(a),
      path: '/loadtest/ping',
      headers: ['Host', 'shop.localhost'],
    });
    expect(answer.status).toBe(200);
    expect(a.cluster?.links?.size).toBe(1);
    expect(captured).toHaveLength(1);
  });

  it('is refused when replayed to the node it was for', async () => {
    const before = b.cluster?.counters.forged ?? 0;
    const [{ value, host }] = captured as [{ value: string; host: string }];
    for (let i = 0; i < 3; i++)
      expect(await linkUpgrade(portOf(b), { host, [AUTH_HEADER]: value })).toBe(403);
    expect(b.cluster?.counters.forged).toBe(before + 3);
  });

  it('is refused when replayed to another node, with the same Host or with its own', async () => {
    const before = c.cluster?.counters.forged ?? 0;
    const [{ value, host }] = captured as [{ value: string; host: string }];
    // Unchanged, it verifies as genuine and signed for B: C answers as to a peer that still names the node
    // once at its address (421, not a forgery), and opens nothing either.
    expect(await linkUpgrade(portOf(c), { host, [AUTH_HEADER]: value })).toBe(421);
    expect(await linkUpgrade(portOf(c), { host: `127.0.0.1:${portOf(c)}`, [AUTH_HEADER]: value })).toBe(403);
    expect(await linkUpgrade(portOf(a), { host: `127.0.0.1:${portOf(a)}`, [AUTH_HEADER]: value })).toBe(403);
    expect(c.cluster?.counters.forged).toBe(before + 1);
    expect(c.linkServer?.size).toBe(0);
  });

  it('answers a genuine link upgrade of the older v1 handshake 426, which such a node takes as "use the HTTP hop"', async () => {
    const host = `127.0.0.1:${portOf(b)}`;
    const v1 = new NodeAuth(SECRET).sign({
      fromNode: 'node-old',
      method: 'GET',
      target: LINK_PATH,
      host,
      peer: '',
      client: '',
      forwardedFor: '',
      proto: '',
      forwardedHost: '',
      prefix: '',
    });
    const before = b.cluster?.counters.forged ?? 0;
    expect(await linkUpgrade(portOf(b), { host, [AUTH_HEADER]: v1 })).toBe(426);
    // Not a forgery: it verified as v1. Its replay is answered the same, and opens nothing either.
    expect(await linkUpgrade(portOf(b), { host, [AUTH_HEADER]: v1 })).toBe(426);
    expect(b.cluster?.counters.forged).toBe(before);
  });

  it('leaves the genuine link serving, and a new link of the node opens with a fresh nonce', async () => {
    const seen = captured.length; // the replays above were upgrades to B too
    a.cluster?.links?.forget(b.url);
    const answer = await send({
      port: portOf(a),
      path: '/loadtest/ping',
      headers: ['Host', 'shop.localhost'],
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-tunnel2-node']).toBe('node-b');
    expect(captured).toHaveLength(seen + 1);
    expect(captured.at(-1)?.value).not.toBe(captured[0]?.value);
  });
});

describe('node records written to Redis without the cluster secret', () => {
  let a: Edge;
  let b: Edge;
  let attacker: SessionRegistry;
  let listener: Awaited<ReturnType<typeof countingListener>>;

  beforeAll(async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    // One registry client per node, as separate processes would have, and one for the attacker.
    const registry = async (): Promise<SessionRegistry> => {
      const made = await createRedisRegistry({ url: redis.url });
      cleanups.push(() => made.close());
      return made;
    };
    // A waits little for a session whose node it cannot find; B renews its record only after the test.
    a = node('node-a', { registry: await registry(), reconnectWaitMs: 600 });
    b = node('node-b', { registry: await registry(), cluster: { secret: SECRET, announceTtlMs: 60_000 } });
    await a.listen();
    await b.listen();
    attacker = await registry();
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const tunnel: Tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
    cleanups.push(() => tunnel.close(0));
    listener = await countingListener();
  });

  it('are ignored: no link and no request goes to the address they name, and they are counted', async () => {
    const genuine = await attacker.lookupNode('node-b');
    expect(genuine?.signature).toBeDefined();
    // B's own signature copied onto another address, then no signature at all.
    const forgeries = [{ signature: genuine?.signature }, {}];
    for (const [i, forgery] of forgeries.entries()) {
      await attacker.announceNode({ nodeId: 'node-b', url: listener.url, ttlMs: 60_000, ...forgery });
      const answer = await send({
        port: portOf(a),
        path: '/loadtest/ping',
        headers: ['Host', 'shop.localhost'],
      });
      expect(answer.status).not.toBe(200);
      expect(answer.headers['x-tunnel2-error']).toMatch(/^TUNNEL2_ERR_/);
      expect(a.cluster?.counters.ignoredRecords).toBeGreaterThanOrEqual(i + 1);
    }
    expect(listener.connections()).toBe(0);
    expect(a.cluster?.links?.size).toBe(0);
  });

  it('once B announces itself again, A forwards to it over a link', async () => {
    b.cluster?.announceNow();
    let answer = await send({ port: portOf(a), path: '/loadtest/ping', headers: ['Host', 'shop.localhost'] });
    // announceNow does not wait for Redis: the first request may still find the forged record (bounded).
    for (let round = 0; round < 20 && answer.status !== 200; round++)
      answer = await send({ port: portOf(a), path: '/loadtest/ping', headers: ['Host', 'shop.localhost'] });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-tunnel2-node']).toBe('node-b');
    expect(a.cluster?.links?.size).toBe(1);
    expect(listener.connections()).toBe(0);
  });
});

/** A link to `target` signed as node-f would sign it, open (its HELLO not yet answered). */
async function openLink(target: Edge, nodeId: string): Promise<WebSocket> {
  const host = `127.0.0.1:${portOf(target)}`;
  const { value } = new NodeAuth(SECRET).signLink('node-f', nodeId, host);
  const ws = new WebSocket(`ws://${host}${LINK_PATH}`, {
    headers: { host, [AUTH_HEADER]: value },
    perMessageDeflate: false,
  });
  cleanups.push(() => ws.terminate());
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return ws;
}

describe('a peer node that authenticates and then says nothing', () => {
  it('has its link closed after helloTimeoutMs, as an agent that sends no HELLO would', async () => {
    const target = node('node-t', { helloTimeoutMs: 300 });
    await target.listen();
    const ws = await openLink(target, 'node-t');
    // Its HELLO comes (the accepting side speaks first); ours never does.
    expect((await once(ws, 'close'))[0]).toBe(1002);
    expect(target.linkServer?.size).toBe(0);
  });

  it('has its link closed when its HELLO offers no protocol version the node speaks', async () => {
    const target = node('node-v', {});
    await target.listen();
    const ws = await openLink(target, 'node-v');
    const goAway = new Promise<number>((resolve) =>
      ws.on('message', (data: Buffer) => {
        if (data[3] === FrameType.GOAWAY) resolve(parseGoAway(data.subarray(9)).code);
      }),
    );
    const hello = { minVersion: 2, maxVersion: 3, settings: resolveSettings({}), meta: { node: 'node-f' } };
    ws.send(encodeHello(hello, true));
    expect(await goAway).toBe(ErrorCode.VERSION_UNSUPPORTED);
    await once(ws, 'close');
    expect(target.linkServer?.size).toBe(0);
  });
});
