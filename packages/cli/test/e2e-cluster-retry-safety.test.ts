import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Edge } from '@tunnel2/edge';
import { ErrorCode } from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { twoNodes } from './support/two-nodes.js';

/**
 * A backend that counts each path's requests and holds the first of each unanswered (`onHeld` hears it);
 * the following ones are answered at once. Held responses are answered when the backend closes.
 */
async function countingBackend(onHeld: () => void): Promise<{
  server: Server;
  port: number;
  hits: Map<string, number>;
}> {
  const hits = new Map<string, number>();
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    const n = (hits.get(path) ?? 0) + 1;
    hits.set(path, n);
    req.resume();
    if (n === 1 && path.startsWith('/once')) {
      held.push(res);
      onHeld();
      return;
    }
    res.end(`run ${n}`);
  });
  server.on('close', () => {
    for (const res of held) res.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as { port: number }).port, hits };
}

/**
 * The agent on B disconnects after B gave it a request (B cuts its session off; the agent reconnects).
 * A POST may have run on the backend: it is answered 502 as on one node, never sent again. A GET is
 * idempotent: it waits for the agent and is sent again. Over the node link and over the HTTP hop.
 */
describe.each([
  ['the node link', true],
  ['the HTTP hop', false],
])('a request whose agent disconnects on the holder, over %s', (_label, nodeLink) => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Awaited<ReturnType<typeof countingBackend>>;
  let tunnel: Tunnel;

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({ b: { cluster: { nodeLink } } }));
    // The holder cuts the agent's session off as soon as the backend holds a request.
    backend = await countingBackend(() =>
      b.sessions.get('shop')?.close(ErrorCode.INTERNAL_ERROR, 'test: agent cut off'),
    );
    tunnel = await connect({
      target: backend.port,
      server: b.url,
      subdomain: 'shop',
      reconnect: { initialMs: 20, maxMs: 50 },
    });
  });

  afterAll(async () => {
    await tunnel?.close(0);
    await b?.close(0);
    await a?.close(0);
    backend?.server.close();
  });

  it('answers a bodyless POST 502 TUNNEL_OFFLINE and never runs it twice', async () => {
    const answer = await send({
      port: portA,
      path: '/once-post',
      method: 'POST',
      headers: ['Host', 'shop.localhost', 'Content-Length', '0'],
    });
    expect(answer.status).toBe(502);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    expect(backend.hits.get('/once-post')).toBe(1);
  });

  it('sends a GET again once the agent is back (it may run twice)', async () => {
    const answer = await send({ port: portA, path: '/once-get', headers: ['Host', 'shop.localhost'] });
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('run 2');
    expect(backend.hits.get('/once-get')).toBe(2);
  });
});
