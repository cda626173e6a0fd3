import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createEdgeMetrics, type Edge, type EdgeMetrics } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { twoNodes } from './support/two-nodes.js';

/** A backend that holds every request to /hold until `release()`, and answers the rest at once. */
async function holdingBackend(): Promise<{
  server: Server;
  port: number;
  held: ServerResponse[];
  release: () => void;
}> {
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    if (req.url === '/hold') held.push(res);
    else res.end('ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    server,
    port: (server.address() as { port: number }).port,
    held,
    release: () => {
      for (const res of held.splice(0)) res.end('released');
    },
  };
}

function connections(edge: Edge): Promise<number> {
  return new Promise((resolve, reject) =>
    edge.publicServer.getConnections((err, count) => (err ? reject(err) : resolve(count))),
  );
}

/** Polls `read` until it gives `want` (bounded in rounds; the test's timeout bounds it in time). */
async function reaches(read: () => Promise<number>, want: number): Promise<number> {
  let value = await read();
  for (let round = 0; round < 2_000 && value !== want; round++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    value = await read();
  }
  return value;
}

describe('a link whose holder drains (its GOAWAY) while a request still runs on it', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Awaited<ReturnType<typeof holdingBackend>>;
  let tunnel: Tunnel;

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({ a: { reconnectWaitMs: 500 } }));
    backend = await holdingBackend();
    tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
  });

  afterAll(async () => {
    backend?.release();
    await tunnel?.close(0);
    await b?.close(0);
    await a?.close(0);
    backend?.server.close();
  });

  it('answers new requests at once rather than queueing them behind the draining link', async () => {
    const first = send({ port: portA, path: '/hold', headers: ['Host', 'shop.localhost'] });
    while (backend.held.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // B drains: GOAWAY on its links; the held request keeps it (and A's old link) open meanwhile.
    const stopped = b.close(30_000);
    // The first may race the GOAWAY; the second comes after A has read it (a whole reconnect wait later).
    for (let i = 0; i < 2; i++) {
      const answer = await send({ port: portA, path: '/probe', headers: ['Host', 'shop.localhost'] });
      expect(answer.status).toBeGreaterThanOrEqual(500);
    }
    backend.release();
    expect((await first).status).toBe(200);
    await stopped;
  });
});

describe('a link this node stops using', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Awaited<ReturnType<typeof holdingBackend>>;
  let tunnel: Tunnel;
  let metrics: EdgeMetrics;

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({ b: { maxRequestBodyBytes: 1_000 } }));
    // Before any link opens: the metrics count refusals on connections they saw arrive.
    metrics = createEdgeMetrics(b, 'test');
    backend = await holdingBackend();
    tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
  });

  afterAll(async () => {
    metrics?.close();
    backend?.release();
    await tunnel?.close(0);
    await b?.close(0);
    await a?.close(0);
    backend?.server.close();
  });

  it('is closed once idle after forget(), not kept alive by heartbeats', async () => {
    const answer = await send({ port: portA, path: '/x', headers: ['Host', 'shop.localhost'] });
    expect(answer.status).toBe(200);
    // The agent's WebSocket and A's link.
    expect(await connections(b)).toBe(2);
    a.cluster?.links?.forget(b.url);
    expect(await reaches(() => connections(b), 1)).toBe(1);
    // The next request opens a new link.
    const again = await send({ port: portA, path: '/x', headers: ['Host', 'shop.localhost'] });
    expect(again.status).toBe(200);
    expect(a.cluster?.links?.size).toBe(1);
  });

  it("counts the holder's refusal of a request carried over the link in the holder's metrics", async () => {
    const answer = await send({
      port: portA,
      path: '/upload',
      method: 'POST',
      headers: ['Host', 'shop.localhost', 'Content-Length', '5000'],
      body: Buffer.alloc(5_000),
    });
    expect(answer.status).toBe(413);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BODY_TOO_LARGE');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    const text = (await metrics.render()).body;
    expect(text).toMatch(/tunnel2_rejected_total\{[^}]*code="TUNNEL2_ERR_BODY_TOO_LARGE"[^}]*\} 1/);
  });
});
