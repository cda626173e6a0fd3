import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { startH2Backend } from './support/h2-backend.js';
import { send, sha256 } from './support/http-client.js';
import { makeCertificates, startHttpsBackend, type TestCertificates } from './support/https-backend.js';
import { silent } from './support/stack.js';

// An https:// target: ALPN offers h2 and http/1.1 and the backend chooses; `http1` (--http1) offers
// HTTP/1.1 only. A backend that chooses HTTP/1.1 is served by the undici path as before.

let certs: TestCertificates;
let edge: Edge;
let port: number;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  certs = await makeCertificates();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await edge.close(0);
  await certs.dispose();
});

describe('an https:// target', () => {
  it('that offers h2 is spoken to over HTTP/2 (the ready event says h2)', async () => {
    const backend = await startH2Backend({ ...certs.selfSigned, allowHTTP1: true });
    cleanups.push(() => backend.close());
    backend.routes.set('/', (stream, headers) => {
      stream.respond({ ':status': 200 });
      stream.end(`h2 ${headers[':scheme']} ${headers[':authority']}`);
    });
    const tunnel = await connect({
      target: `https://localhost:${backend.port}`,
      server: edge.url,
      subdomain: 'alpn-h2',
      insecure: true,
    });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.backendProtocol).toBe('h2');
    const res = await send({ port, path: '/', headers: ['host', `alpn-h2.localhost:${port}`] });
    expect(res.body.toString()).toBe(`h2 https localhost:${backend.port}`);
    expect(backend.http1).toBe(0);
  });

  it('with http1 (--http1) is spoken to over HTTP/1.1 even though it offers h2', async () => {
    const backend = await startH2Backend({ ...certs.selfSigned, allowHTTP1: true });
    cleanups.push(() => backend.close());
    const tunnel = await connect({
      target: `https://localhost:${backend.port}`,
      server: edge.url,
      subdomain: 'alpn-h1',
      insecure: true,
      http1: true,
    });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.backendProtocol).toBe('http/1.1');
    const res = await send({ port, path: '/x', headers: ['host', `alpn-h1.localhost:${port}`] });
    expect(res.body.toString()).toBe('h1 /x');
    expect(backend.http1).toBe(1);
    expect(backend.seen).toHaveLength(0);
  });

  it('that offers only http/1.1 is served by the HTTP/1.1 path', async () => {
    const backend = await startHttpsBackend(certs.selfSigned);
    cleanups.push(() => backend.close());
    const tunnel = await connect({
      target: `https://localhost:${backend.port}`,
      server: edge.url,
      subdomain: 'alpn-only1',
      insecure: true,
    });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.backendProtocol).toBe('http/1.1');
    const res = await send({ port, path: '/p', headers: ['host', `alpn-only1.localhost:${port}`] });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toMatchObject({ url: '/p' });
  });

  it('not up at start: the first request learns the choice, and a body sent meanwhile arrives whole', async () => {
    // A port that was free a moment ago: the start's probe finds nothing, the backend comes up after.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const free = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const tunnel = await connect({
      target: `https://localhost:${free}`,
      server: edge.url,
      subdomain: 'alpn-late',
      insecure: true,
    });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.backendProtocol).toBeUndefined();
    const server = createHttpsServer(certs.selfSigned, (req, res) => {
      res.writeHead(200, { 'x-version': req.httpVersion });
      req.pipe(res);
    });
    server.listen(free, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    });
    const body = randomBytes(1024 * 1024);
    const res = await send({
      port,
      path: '/echo',
      method: 'POST',
      headers: ['host', `alpn-late.localhost:${port}`],
      body,
      keepBody: false,
    });
    expect(res.headers['x-version']).toBe('1.1');
    expect(res.sha256).toBe(sha256(body));
    expect(tunnel.backendProtocol).toBe('http/1.1');
  });

  it('that takes the connection but never completes TLS: each request gets 504 when the dial times out', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => silent.close(resolve));
    });
    const tunnel = await connect({
      target: `https://localhost:${(silent.address() as AddressInfo).port}`,
      server: edge.url,
      subdomain: 'alpn-silent',
      insecure: true,
      backendConnectTimeoutMs: 300,
    });
    cleanups.push(() => tunnel.close(0));
    // Twice: a dial that hung would hold every later request on it.
    for (let i = 0; i < 2; i++) {
      const res = await send({ port, path: '/', headers: ['host', `alpn-silent.localhost:${port}`] });
      expect(res.status).toBe(504);
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_TIMEOUT');
    }
  });
});
