import { createHash } from 'node:crypto';
import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import type { Duplex } from 'node:stream';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend, deterministicSha256 } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const LINK_PATH = '/_tunnel2/node-link';

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

function portOf(edge: Edge): number {
  return Number(new URL(edge.url).port);
}

/** Waits until `read()` gives the same value `times` polls in a row (bounded in rounds); returns it. */
async function settled(read: () => number, times = 5): Promise<number> {
  let last = read();
  let same = 0;
  for (let round = 0; round < 400 && same < times; round++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = read();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

/** The answer to a WebSocket upgrade of the link path, as a status code (101 when it opened). */
function linkUpgrade(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${LINK_PATH}`, { headers });
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

/** A GET of `size` deterministic bytes from the `shop` tunnel through the node at `port`. */
function download(port: number, size: number): ClientRequest {
  return request({
    host: '127.0.0.1',
    port,
    path: `/bytes/${size}`,
    headers: { host: 'shop.localhost' },
    agent: false,
  });
}

/** Node A and a second node on A's registry (the memory one: both in this process), both listening. */
async function twoNodes(second: string, nodeLink: boolean): Promise<[Edge, Edge]> {
  const first = buildEdge({ port: 0, logger: silent, nodeId: 'node-a', cluster: { secret: SECRET } });
  const other = buildEdge({
    port: 0,
    logger: silent,
    nodeId: second,
    registry: first.options.registry,
    cluster: { secret: SECRET, nodeLink },
  });
  await first.listen();
  await other.listen();
  return [first, other];
}

/** Two nodes; the agent on B, clients on A: forwarded requests take the link from A to B. */
describe('node-to-node link', () => {
  let a: Edge;
  let b: Edge;
  let backend: Backend;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    [a, b] = await twoNodes('node-b', true);
    backend = await createTestBackend();
    tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: 'shop' }));
  });

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    await b.close(0);
    await a.close(0);
    await backend.close();
  });

  it('carries forwarded requests over one link per peer, not the HTTP hop', async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        send({ port: portOf(a), path: '/bytes/1000', headers: ['Host', 'shop.localhost'] }),
      ),
    );
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.sha256).toBe(deterministicSha256(1000));
      expect(answer.headers['x-tunnel2-node']).toBe('node-b');
    }
    expect(a.cluster?.links?.size).toBe(1);
    expect(a.cluster?.links?.viaHop(b.url)).toBe(false);
    expect(a.cluster?.counters.forwarded.ok).toBeGreaterThanOrEqual(20);
  });

  it('refuses a link upgrade without a valid signature, and counts it', async () => {
    const before = b.cluster?.counters.forged ?? 0;
    expect(await linkUpgrade(portOf(b), {})).toBe(403);
    expect(
      await linkUpgrade(portOf(b), {
        'x-tunnel2-node-auth': `v1 node-a ${Date.now()} ${'0'.repeat(64)}`,
      }),
    ).toBe(403);
    expect(b.cluster?.counters.forged).toBe(before + 2);
  });

  it('strips link metadata a public client sends: it cannot pick the session or its client address', async () => {
    const answer = await send({
      port: portOf(a),
      path: '/echo/request/x',
      headers: [
        'Host',
        'shop.localhost',
        'x-tunnel2-link-session',
        'other',
        'x-tunnel2-link-client',
        '10.0.0.1',
      ],
    });
    expect(answer.status).toBe(200);
    const seen = answer.body.toString().toLowerCase();
    expect(seen).not.toContain('x-tunnel2-link');
    expect(seen).not.toContain('10.0.0.1');
  });

  it('keeps the holder within its windows for a slow client of a 50 MiB download, then delivers it whole', async () => {
    const size = 50 * 1024 * 1024;
    const counters = a.cluster!.hop.counters;
    const start = counters.bytesIn;
    const hash = createHash('sha256');
    let received = 0;
    let res: IncomingMessage | undefined;
    let headed: () => void = () => {};
    const head = new Promise<void>((resolve) => (headed = resolve));
    const done = new Promise<void>((resolve, reject) => {
      const req = download(portOf(a), size);
      req.on('error', reject);
      req.on('response', (answer) => {
        res = answer;
        answer.pause();
        headed();
        answer.on('data', (chunk: Buffer) => {
          received += chunk.length;
          hash.update(chunk);
        });
        answer.on('end', () => resolve());
        answer.on('error', reject);
      });
      req.end();
    });
    // The client reads nothing: what crossed the link stops growing, far below the body's size.
    await head;
    const crossed = await settled(() => counters.bytesIn - start);
    expect(crossed).toBeGreaterThan(0);
    expect(crossed).toBeLessThan(16 * 1024 * 1024);
    res?.resume();
    await done;
    expect(received).toBe(size);
    expect(hash.digest('hex')).toBe(deterministicSha256(size));
  });

  it('a link that dies mid-response gives the client an aborted response, never a short one', async () => {
    const size = 50 * 1024 * 1024;
    // B's end of the link, seen as it is accepted: the idle link from earlier tests goes first, so the
    // download opens a new one here. Destroying that socket is the link dying (a peer gone, a cut network).
    const linkSockets: Duplex[] = [];
    const onUpgrade = (req: IncomingMessage, socket: Duplex): void => {
      if (req.url === '/_tunnel2/node-link') linkSockets.push(socket);
    };
    b.app.server.on('upgrade', onUpgrade);
    a.cluster?.links?.forget(b.url);
    const outcome = await new Promise<{ received: number; aborted: boolean }>((resolve) => {
      let received = 0;
      const req = download(portOf(a), size);
      req.on('error', () => resolve({ received, aborted: true }));
      req.on('response', (answer) => {
        answer.once('data', () => {
          expect(linkSockets).toHaveLength(1);
          for (const socket of linkSockets) socket.destroy();
        });
        answer.on('data', (chunk: Buffer) => (received += chunk.length));
        answer.on('aborted', () => resolve({ received, aborted: true }));
        answer.on('error', () => resolve({ received, aborted: true }));
        answer.on('end', () => resolve({ received, aborted: !answer.complete }));
      });
      req.end();
    });
    b.app.server.off('upgrade', onUpgrade);
    expect(outcome.aborted).toBe(true);
    expect(outcome.received).toBeLessThan(size);
    // The next request opens a new link.
    const again = await send({ port: portOf(a), path: '/bytes/10', headers: ['Host', 'shop.localhost'] });
    expect(again.status).toBe(200);
  });
});

/** A rolling upgrade: a peer without links (an older node) is reached through the HTTP hop. */
describe('node-to-node link fallback', () => {
  let a: Edge;
  let old: Edge;
  let backend: Backend;
  let tunnel: Tunnel;

  beforeAll(async () => {
    [a, old] = await twoNodes('node-old', false);
    backend = await createTestBackend();
    tunnel = await connect({ target: backend.port, server: old.url, subdomain: 'legacy' });
  });

  afterAll(async () => {
    await tunnel.close(0);
    await old.close(0);
    await a.close(0);
    await backend.close();
  });

  it('answers a link upgrade 404 when links are off, and the peer is then reached by the HTTP hop', async () => {
    expect(await linkUpgrade(portOf(old), {})).toBe(404);
    for (let i = 0; i < 3; i++) {
      const answer = await send({
        port: portOf(a),
        path: '/bytes/1000',
        headers: ['Host', 'legacy.localhost'],
      });
      expect(answer.status).toBe(200);
      expect(answer.sha256).toBe(deterministicSha256(1000));
      expect(answer.headers['x-tunnel2-node']).toBe('node-old');
    }
    expect(a.cluster?.links?.viaHop(old.url)).toBe(true);
    expect(a.cluster?.links?.size).toBe(0);
    expect(a.cluster?.counters.forwarded.ok).toBeGreaterThanOrEqual(3);
  });
});
