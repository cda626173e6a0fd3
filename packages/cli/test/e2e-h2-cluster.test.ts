import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Edge } from '@tunnel2/edge';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c, h2Request } from './support/h2-client.js';
import { twoNodes } from './support/two-nodes.js';

// An HTTP/2 request arriving at a node whose session lives on another node: carried over the node link
// like an HTTP/1.1 one, its answer (trailers included) written back as HTTP/2.

let backend: Server;
let target: number;
const running: { a: Edge; b: Edge; tunnel: Tunnel }[] = [];

beforeAll(async () => {
  backend = createServer((req, res) => {
    if (req.url === '/trailers') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('body');
      res.addTrailers({ 'x-checksum': 'abc' });
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    req.pipe(res);
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  target = (backend.address() as AddressInfo).port;
});

afterEach(async () => {
  for (const { a, b, tunnel } of running.splice(0)) {
    await tunnel.close(0);
    await a.close(0);
    await b.close(0);
  }
});

afterAll(async () => {
  await new Promise((resolve) => backend.close(resolve));
});

describe('HTTP/2 across nodes', () => {
  it('over the node link: a POST body and response trailers, answered as HTTP/2 by the ingress node', async () => {
    const { a, b, portA } = await twoNodes();
    const tunnel = await connect({ target, server: b.url, subdomain: 'shop' });
    running.push({ a, b, tunnel });
    const session = h2c(portA);
    const echo = await h2Request(
      session,
      { ':method': 'POST', ':path': '/echo', ':authority': `shop.localhost:${portA}` },
      { body: ['across ', 'nodes'] },
    );
    const trailers = await h2Request(session, {
      ':path': '/trailers',
      ':authority': `shop.localhost:${portA}`,
    });
    session.close();
    expect(echo.status).toBe(200);
    expect(echo.headers['x-tunnel2-node']).toBe('node-b');
    expect(echo.body.toString()).toBe('across nodes');
    expect(trailers.body.toString()).toBe('body');
    expect(trailers.trailers?.['x-checksum']).toBe('abc');
  });

  it('without node links (the HTTP hop carries HTTP/1.1): a clear 502 naming links', async () => {
    const { a, b, portA } = await twoNodes({
      a: { cluster: { nodeLink: false } },
      b: { cluster: { nodeLink: false } },
    });
    const tunnel = await connect({ target, server: b.url, subdomain: 'shop' });
    running.push({ a, b, tunnel });
    const session = h2c(portA);
    const answer = await h2Request(session, { ':path': '/echo', ':authority': `shop.localhost:${portA}` });
    session.close();
    expect(answer.status).toBe(502);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_NODE_UNREACHABLE');
    expect(answer.body.toString()).toMatch(/node links carry HTTP\/2/);
    // HTTP/1.1 still crosses by the hop.
    const res = await fetch(`http://127.0.0.1:${portA}/session/shop/echo`, {
      method: 'POST',
      body: 'by the hop',
    });
    expect(await res.text()).toBe('by the hop');
  });
});
