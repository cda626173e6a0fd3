// The forms of an error answer over real sockets: the agent's backend errors, the edge's own, and a
// refusal a holder node writes for another node to relay, each as the client's Accept asks (the page in a
// real browser: e2e-error-pages.test.ts).
import { createServer } from 'node:net';
import { buildEdge } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startEdge() {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { port, url };
}

describe('backend errors, rendered by the agent', () => {
  it('plain text for curl, a page for a browser, JSON on request, headers alone for HEAD', async () => {
    const { port, url } = await startEdge();
    const backendPort = await closedPort();
    const tunnel = await connect({ target: `localhost:${backendPort}`, server: url, subdomain: 'down' });
    cleanups.push(() => tunnel.close(0));
    const ask = (accept: string | undefined, method = 'GET') =>
      send({
        port,
        method,
        path: '/x',
        headers: ['Host', `down.localhost:${port}`, ...(accept === undefined ? [] : ['Accept', accept])],
      });

    const curl = await ask('*/*');
    expect(curl.status).toBe(502);
    expect(curl.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
    expect(curl.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(curl.body.toString()).toBe(`tunnel2: backend refused connection on localhost:${backendPort}\n`);
    expect(curl.headers.vary).toBe('Accept');
    expect((await ask(undefined)).body.toString()).toBe(curl.body.toString());

    const page = await send({
      port,
      path: '/x',
      headers: ['Host', `down.localhost:${port}`, 'Accept', BROWSER, 'X-Request-Id', 'req-42'],
    });
    expect(page.status).toBe(502);
    expect(page.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toMatch(/^default-src 'none'; style-src 'unsafe-inline'/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-store');
    const html = page.body.toString();
    expect(html).toContain(`your local server at localhost:${backendPort}`);
    expect(html).toContain(`Start your local server on localhost:${backendPort}`);
    // The request id reached the agent with the request, and the page names it.
    expect(html).toContain('req-42');

    const json = await ask('application/json');
    expect(json.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(json.body.toString())).toMatchObject({
      error: {
        status: 502,
        code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
        where: 'backend',
        target: `localhost:${backendPort}`,
      },
    });

    const head = await ask(BROWSER, 'HEAD');
    expect(head.status).toBe(502);
    expect(head.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(head.headers['content-length']).toBe(String((await ask(BROWSER)).body.length));
    expect(head.body.length).toBe(0);
  });
});

describe("the edge's own answers", () => {
  it('an unknown name: the old line for curl, a page naming the code for a browser, hostile names escaped', async () => {
    const { port } = await startEdge();
    const curl = await send({ port, path: '/', headers: ['Host', `nobody.localhost:${port}`] });
    expect(curl.status).toBe(404);
    expect(curl.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(curl.body.toString()).toBe('no tunnel named "nobody" is connected to this edge\n');

    const hostile = '<img src=x onerror=alert(1)>';
    const page = await send({
      port,
      path: `/session/${encodeURIComponent(hostile)}/`,
      headers: ['Host', `localhost:${port}`, 'Accept', BROWSER, 'X-Request-Id', 'rid-1'],
    });
    expect(page.status).toBe(404);
    expect(page.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const html = page.body.toString();
    expect(html).toContain('<title>404 Tunnel not found</title>');
    expect(html).toContain('rid-1');
    expect(html).not.toContain('<img');
  });
});

describe("the edge's own 404 for a path that is no tunnel URL", () => {
  it('is the old line for curl and a page for a browser; HEAD has no body', async () => {
    const { port } = await startEdge();
    const ask = (accept: string | undefined, method = 'GET') =>
      send({
        port,
        method,
        path: '/nope',
        headers: ['Host', `localhost:${port}`, ...(accept === undefined ? [] : ['Accept', accept])],
      });
    const curl = await ask('*/*');
    expect(curl.status).toBe(404);
    expect(curl.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(curl.body.toString()).toBe(
      `not found: "/nope" is not a tunnel URL. Use http://<name>.localhost:${port}/ or /session/<name>/...\n`,
    );
    const page = await ask(BROWSER);
    expect(page.status).toBe(404);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body.toString()).toContain('is not a tunnel URL. Use http://&lt;name&gt;.localhost');
    const head = await ask(BROWSER, 'HEAD');
    expect(head.status).toBe(404);
    expect(head.headers['content-length']).toBe(String(page.body.length));
    expect(head.body.length).toBe(0);
  });
});

describe('a refusal relayed from the node holding the tunnel', () => {
  it.each([
    ['a node link', true],
    ['the HTTP hop', false],
  ])(
    'over %s: takes the form the public client asked for, with WWW-Authenticate kept',
    async (_, nodeLink) => {
      const { a, b, portA } = await twoNodes({ a: { cluster: { nodeLink } }, b: { cluster: { nodeLink } } });
      cleanups.push(
        () => a.close(0),
        () => b.close(0),
      );
      const tunnel = await connect({
        target: await closedPort(),
        server: b.url,
        subdomain: 'guarded',
        basicAuth: 'user:secret',
      });
      cleanups.push(() => tunnel.close(0));
      const ask = (accept: string | undefined) =>
        send({
          port: portA,
          path: '/',
          headers: [
            'Host',
            `guarded.localhost:${portA}`,
            ...(accept === undefined ? [] : ['Accept', accept]),
          ],
        });
      const curl = await ask(undefined);
      expect(curl.status).toBe(401);
      expect(curl.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED');
      expect(curl.headers['www-authenticate']).toMatch(/^Basic /);
      expect(curl.headers['content-type']).toBe('text/plain; charset=utf-8');

      const page = await ask(BROWSER);
      expect(page.status).toBe(401);
      expect(page.headers['www-authenticate']).toBe(curl.headers['www-authenticate']);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.body.toString()).toContain('--basic-auth');
    },
  );
});
