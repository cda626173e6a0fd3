import { createHash } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend, deterministicSha256 } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { headerValues, send } from './support/http-client.js';
import { rawExchange } from './support/raw-client.js';
import { type SemanticsBackend, startSemanticsBackend } from './support/semantics-backend.js';
import { silent } from './support/stack.js';
import { startWsBackend, type WsBackend } from './support/ws-backend.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/** Two edge nodes sharing one registry; the agent connects to B, clients ask A: a real node-to-node hop. */
describe('cross-node forwarding', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Backend;
  let wsBackend: WsBackend;
  let sse: Server;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    a = buildEdge({ port: 0, logger: silent, nodeId: 'node-a', cluster: { secret: SECRET } });
    b = buildEdge({
      port: 0,
      logger: silent,
      nodeId: 'node-b',
      registry: a.options.registry,
      cluster: { secret: SECRET },
    });
    portA = (await a.listen()).port;
    await b.listen();
    backend = await createTestBackend();
    wsBackend = await startWsBackend();
    sse = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('data: first\n\n');
      // The second event only after the client saw the first: proves nothing waits for the end.
      res.once('continue-sse', () => res.end('data: second\n\n'));
      sseResponses.push(res);
    });
    await new Promise<void>((resolve) => sse.listen(0, '127.0.0.1', resolve));
    tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: 'shop' }));
    tunnels.push(await connect({ target: wsBackend.port, server: b.url, subdomain: 'wsecho' }));
    tunnels.push(
      await connect({ target: (sse.address() as AddressInfo).port, server: b.url, subdomain: 'sse' }),
    );
    tunnels.push(
      await connect({ target: backend.port, server: b.url, subdomain: 'locked', basicAuth: 'ann:s3cret' }),
    );
    tunnels.push(
      await connect({ target: backend.port, server: b.url, subdomain: 'tenonly', allowIps: ['10.0.0.0/8'] }),
    );
  });

  const sseResponses: import('node:http').ServerResponse[] = [];

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    await b.close(0);
    await a.close(0);
    await backend.close();
    await wsBackend.close();
    await new Promise<void>((resolve) => sse.close(() => resolve()));
  });

  it('serves a GET on A for a session held by B, names the serving node, by host and by path', async () => {
    const byHost = await send({
      port: portA,
      path: '/bytes/1000',
      headers: ['Host', `shop.localhost:${portA}`],
    });
    expect(byHost.status).toBe(200);
    expect(byHost.sha256).toBe(deterministicSha256(1000));
    expect(byHost.headers['x-tunnel2-node']).toBe('node-b');
    const byPath = await send({
      port: portA,
      path: '/session/shop/bytes/1000',
      headers: ['Host', `localhost:${portA}`],
    });
    expect(byPath.status).toBe(200);
    expect(byPath.sha256).toBe(deterministicSha256(1000));
    const local = await send({
      port: Number(new URL(b.url).port),
      path: '/bytes/10',
      headers: ['Host', 'shop.localhost'],
    });
    expect(local.headers['x-tunnel2-node']).toBe('node-b');
    expect(a.cluster?.counters.forwarded.ok).toBeGreaterThanOrEqual(2);
  });

  it('streams 50 MiB both ways through the hop (SHA-256 checked)', async () => {
    const size = 50 * 1024 * 1024;
    const down = await send({
      port: portA,
      path: `/bytes/${size}`,
      headers: ['Host', 'shop.localhost'],
      keepBody: false,
    });
    expect(down.length).toBe(size);
    expect(down.sha256).toBe(deterministicSha256(size));
    const hash = createHash('sha256');
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024);
    const body = new Readable({
      read() {
        if (sent >= size) {
          this.push(null);
          return;
        }
        chunk.writeUInt32BE(sent, 0);
        hash.update(chunk);
        sent += chunk.length;
        this.push(Buffer.from(chunk));
      },
    });
    const up = await send({
      port: portA,
      path: '/upload',
      method: 'POST',
      headers: ['Host', 'shop.localhost', 'Content-Type', 'application/octet-stream'],
      body,
    });
    expect(up.status).toBe(200);
    const answer = JSON.parse(up.body.toString()) as { bytes: number; sha256: string };
    expect(answer).toEqual({ bytes: size, sha256: hash.digest('hex') });
  });

  it('tells the backend the real client, not node A', async () => {
    const seen = await send({
      port: portA,
      path: '/echo/request/x',
      headers: ['Host', 'shop.localhost', 'X-Forwarded-For', '6.6.6.6', 'x-tunnel2-node-client', '10.1.1.1'],
    });
    const raw = (JSON.parse(seen.body.toString()) as { rawHeaders: string[] }).rawHeaders;
    expect(headerValues(raw, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(headerValues(raw, 'x-forwarded-host')).toEqual(['shop.localhost']);
    expect(headerValues(raw, 'x-tunnel2-node-auth')).toEqual([]);
    expect(headerValues(raw, 'x-tunnel2-node-client')).toEqual([]);
  });

  it('enforces basic auth and the allow-list on B with the real client address', async () => {
    const denied = await send({ port: portA, path: '/bytes/1', headers: ['Host', 'locked.localhost'] });
    expect(denied.status).toBe(401);
    const allowed = await send({
      port: portA,
      path: '/bytes/1',
      headers: [
        'Host',
        'locked.localhost',
        'Authorization',
        `Basic ${Buffer.from('ann:s3cret').toString('base64')}`,
      ],
    });
    expect(allowed.status).toBe(200);
    // A client cannot claim to be 10.x through the node headers: it is 127.0.0.1 and refused.
    const forbidden = await send({
      port: portA,
      path: '/bytes/1',
      headers: ['Host', 'tenonly.localhost', 'x-tunnel2-node-client', '10.0.0.1'],
    });
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN');
  });

  it('refuses a forged node signature and never forwards a forwarded request', async () => {
    const portB = Number(new URL(b.url).port);
    const forged = await send({
      port: portB,
      path: '/echo/request/x',
      headers: [
        'Host',
        'shop.localhost',
        'x-tunnel2-node-auth',
        `v1 node-a ${Date.now()} ${'0'.repeat(64)}`,
        'x-tunnel2-node-client',
        '10.0.0.1',
      ],
    });
    expect(forged.status).toBe(403);
    expect(forged.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_NODE_AUTH_INVALID');
    // A signed request for a name B does not hold is answered by B, not sent back to A.
    const before = b.cluster?.counters.lookups.miss ?? 0;
    const headers = a.cluster!.hopHeaders(
      Object.assign(Object.create(null), {
        method: 'GET',
        url: '/',
        headers: { host: 'nothere.localhost' },
        rawHeaders: ['Host', 'nothere.localhost'],
      }),
      {
        peer: '127.0.0.1',
        client: '127.0.0.1',
        chain: undefined,
        proto: 'http',
        host: 'nothere.localhost',
        prefix: '',
      },
    );
    const loop = await send({ port: portB, path: '/', headers });
    expect(loop.status).toBe(404);
    expect(b.cluster?.counters.lookups.miss ?? 0).toBe(before);
  });

  it('relays a WebSocket echo across the hop', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${portA}/echo`, { headers: { host: 'wsecho.localhost' } });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const echoed = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
    ws.send('hello across nodes');
    expect(await echoed).toBe('hello across nodes');
    ws.close();
  });

  it('relays SSE events as they come', async () => {
    const { request } = await import('node:http');
    const events: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: portA, path: '/', headers: { host: 'sse.localhost' } });
      req.on('error', reject);
      req.on('response', (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          events.push(text);
          if (events.length === 1) sseResponses.at(-1)?.emit('continue-sse');
        });
        res.on('end', () => resolve());
      });
      req.end();
    });
    expect(events.join('')).toBe('data: first\n\ndata: second\n\n');
  });

  it('answers a specific 502 promptly when the owner node is gone', async () => {
    const c = buildEdge({
      port: 0,
      logger: silent,
      nodeId: 'node-c',
      registry: a.options.registry,
      cluster: { secret: SECRET },
    });
    await c.listen();
    const tunnel = await connect({ target: backend.port, server: c.url, subdomain: 'onc' });
    const ok = await send({ port: portA, path: '/bytes/10', headers: ['Host', 'onc.localhost'] });
    expect(ok.headers['x-tunnel2-node']).toBe('node-c');
    // Stop node C's listener without telling the registry: the session record still names it.
    c.publicServer.close();
    c.app.server.closeAllConnections();
    expect(c.publicServer.listening).toBe(false);
    const gone = await send({ port: portA, path: '/bytes/10', headers: ['Host', 'onc.localhost'] });
    expect(gone.status).toBe(502);
    expect(gone.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_NODE_UNREACHABLE');
    expect(gone.body.toString()).toContain('node-c');
    expect(a.cluster?.counters.forwarded.unreachable).toBeGreaterThanOrEqual(1);
    await tunnel.close(0).catch(() => {});
    await c.close(0).catch(() => {});
  });
});

/** What single-node tunnel2 keeps must survive the node-to-node hop too. */
describe('cross-node wire fidelity', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let semantics: SemanticsBackend;
  let ordered: Server;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    a = buildEdge({ port: 0, logger: silent, nodeId: 'node-a', cluster: { secret: SECRET } });
    b = buildEdge({
      port: 0,
      logger: silent,
      nodeId: 'node-b',
      registry: a.options.registry,
      cluster: { secret: SECRET },
    });
    portA = (await a.listen()).port;
    await b.listen();
    semantics = await startSemanticsBackend();
    ordered = createServer((_req, res) => {
      // Order and case a browser or a signature scheme may depend on; a flat array keeps both in Node.
      res.writeHead(200, [
        'X-Zeta',
        '1',
        'x-alpha',
        '2',
        'X-MiXeD-Case',
        '3',
        'Set-Cookie',
        'a=1',
        'Set-Cookie',
        'b=2',
      ]);
      res.end('ordered');
    });
    await new Promise<void>((resolve) => ordered.listen(0, '127.0.0.1', resolve));
    tunnels.push(await connect({ target: semantics.port, server: b.url, subdomain: 'sem' }));
    tunnels.push(
      await connect({ target: (ordered.address() as AddressInfo).port, server: b.url, subdomain: 'ordered' }),
    );
  });

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    await b.close(0);
    await a.close(0);
    await semantics.close();
    ordered.closeAllConnections();
    await new Promise<void>((resolve) => ordered.close(() => resolve()));
  });

  it('keeps the raw order and case of response fields', async () => {
    const text = await rawExchange(
      portA,
      'GET / HTTP/1.1\r\nHost: ordered.localhost\r\nConnection: close\r\n\r\n',
    );
    const head = text.split('\r\n\r\n')[0] ?? '';
    expect(head).toMatch(/X-Zeta: 1\r\nx-alpha: 2\r\nX-MiXeD-Case: 3\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2/);
    expect(head).toContain('x-tunnel2-node: node-b');
    expect(a.cluster?.counters.forwarded.ok).toBeGreaterThanOrEqual(1);
  });

  it('relays a 103 Early Hints before the final answer', async () => {
    const text = await rawExchange(
      portA,
      'GET /early-hints HTTP/1.1\r\nHost: sem.localhost\r\nConnection: close\r\n\r\n',
    );
    const [hints = '', rest = ''] = text.split(/\r\n\r\n(.*)/s);
    expect(hints).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n/);
    expect(hints).toContain('</style.css>; rel=preload; as=style');
    expect(rest).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(rest).toMatch(/after hints$/);
  });

  it('relays trailers after a chunked body', async () => {
    const answer = await new Promise<{ body: string; trailers: NodeJS.Dict<string>; raw: string[] }>(
      (resolve, reject) => {
        const req = request({
          host: '127.0.0.1',
          port: portA,
          path: '/trailers',
          headers: { host: 'sem.localhost' },
          agent: false,
        });
        req.on('error', reject);
        req.on('response', (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () => resolve({ body, trailers: res.trailers, raw: res.rawTrailers }));
        });
        req.end();
      },
    );
    expect(answer.body).toBe('chunked body');
    expect(answer.trailers).toEqual({ 'x-checksum': 'sha256-abc', 'x-status': 'done' });
  });

  it('lets the backend decide on Expect: 100-continue: its 100, then the body', async () => {
    const body = 'x'.repeat(5_000);
    const seen = await new Promise<{
      continued: number;
      status: number;
      text: string;
      trailers: NodeJS.Dict<string>;
    }>((resolve, reject) => {
      let continued = 0;
      const req = request({
        host: '127.0.0.1',
        port: portA,
        method: 'POST',
        path: '/expect/trailers',
        headers: { host: 'sem.localhost', expect: '100-continue', 'content-length': String(body.length) },
        agent: false,
      });
      req.on('error', reject);
      req.on('continue', () => {
        continued++;
        req.end(body);
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () =>
          resolve({ continued, status: res.statusCode ?? 0, text, trailers: res.trailers }),
        );
      });
    });
    expect(seen).toEqual({
      continued: 1,
      status: 200,
      text: 'received 5000 bytes',
      trailers: { 'x-received': '5000' },
    });
  });

  it('relays the backend refusing an Expect: 100-continue body (417, no 100 from node A)', async () => {
    const text = await rawExchange(
      portA,
      'POST /expect/reject HTTP/1.1\r\nHost: sem.localhost\r\nExpect: 100-continue\r\nContent-Length: 10\r\nConnection: close\r\n\r\n',
    );
    expect(text).not.toContain('100 Continue');
    expect(text).toMatch(/^HTTP\/1\.1 417 /);
    expect(text).toContain('too big, do not send it');
  });
});
