import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { startH2Backend } from './support/h2-backend.js';
import { send } from './support/http-client.js';
import { silent, until } from './support/stack.js';

// The agent's own answers on its HTTP/2 path (h2-exchange.ts, h2-backend.ts), each tunnel with a backend
// that fails in its own way: down, mute (no SETTINGS), HTTP/1.1 behind --h2c, and a gRPC call for an
// HTTP/1.1 backend. (The working h2c backend's tests are in e2e-h2-backend.test.ts.)

let edge: Edge;
let port: number;

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
});
afterAll(async () => {
  await edge.close(0);
});

describe('a backend that is down', () => {
  let down: Tunnel;
  beforeAll(async () => {
    // A port that was free a moment ago: nothing listens on it.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const free = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    down = await connect({ target: free, server: edge.url, subdomain: 'h2c-down', h2c: true });
  });
  afterAll(() => down.close(0));

  it('gives a plain request the 502 page', async () => {
    const res = await send({ port, path: '/', headers: ['host', `h2c-down.localhost:${port}`] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
  });

  it('gives a gRPC call the gRPC form: 200, grpc-status 14, a message naming the target and cause', async () => {
    const res = await send({
      port,
      path: '/pkg.Svc/Unary',
      method: 'POST',
      headers: ['host', `h2c-down.localhost:${port}`, 'content-type', 'application/grpc'],
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/grpc');
    expect(res.headers['grpc-status']).toBe('14');
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
    expect(decodeURIComponent(String(res.headers['grpc-message']))).toMatch(
      /refused connection on localhost:/,
    );
    expect(res.length).toBe(0);
  });

  it('leaves no stream open: the body that waited for a backend stream is consumed', async () => {
    const res = await send({
      port,
      path: '/pkg.Svc/Upload',
      method: 'POST',
      headers: ['host', `h2c-down.localhost:${port}`, 'content-type', 'application/grpc'],
      body: Buffer.alloc(100_000, 1),
    });
    expect(res.headers['grpc-status']).toBe('14');
    // Left open, the stream would hold a graceful close (Ctrl-C, SIGTERM) for its whole grace.
    await until(() => down.sessionStats?.openStreams === 0, { what: 'no open stream', timeoutMs: 5_000 });
  });
});

describe('a backend that takes the connection and never sends SETTINGS', () => {
  it('a gRPC call gets UNAVAILABLE (14) when the dial times out, not DEADLINE_EXCEEDED: its own deadline did not pass', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const mute = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    const hung = await connect({
      target: (mute.address() as AddressInfo).port,
      server: edge.url,
      subdomain: 'h2c-mute',
      h2c: true,
      backendConnectTimeoutMs: 300,
    });
    try {
      const res = await send({
        port,
        path: '/pkg.Svc/Unary',
        method: 'POST',
        headers: ['host', `h2c-mute.localhost:${port}`, 'content-type', 'application/grpc'],
        body: Buffer.from([0, 0, 0, 0, 0]),
      });
      expect(res.status).toBe(200);
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_TIMEOUT');
      expect(res.headers['grpc-status']).toBe('14');
      // A plain request still reads 504, as an HTTP/1.1 backend's connect timeout does.
      const plain = await send({ port, path: '/', headers: ['host', `h2c-mute.localhost:${port}`] });
      expect(plain.status).toBe(504);
    } finally {
      await hung.close(0);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => mute.close(resolve));
    }
  });
});

describe('an HTTP/1.1 server run with --h2c', () => {
  it('answers 502 saying the backend does not speak HTTP/2', async () => {
    const server = createHttpServer((_req, res) => res.end('h1'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const h1 = await connect({
      target: (server.address() as AddressInfo).port,
      server: edge.url,
      subdomain: 'h1-as-h2c',
      h2c: true,
    });
    try {
      const res = await send({ port, path: '/', headers: ['host', `h1-as-h2c.localhost:${port}`] });
      expect(res.status).toBe(502);
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_INVALID_RESPONSE');
      expect(res.body.toString()).toMatch(/does not speak HTTP\/2 with prior knowledge.*without --h2c/);
    } finally {
      await h1.close(0);
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a gRPC call for an HTTP/1.1 backend', () => {
  it('is answered UNIMPLEMENTED (12) with TUNNEL2_ERR_BACKEND_NOT_HTTP2, naming --h2c', async () => {
    const plain = await startH2Backend(); // never reached: the agent answers itself
    const h1 = await connect({ target: plain.port, server: edge.url, subdomain: 'h1-grpc' });
    try {
      const res = await send({
        port,
        path: '/pkg.Svc/Unary',
        method: 'POST',
        headers: ['host', `h1-grpc.localhost:${port}`, 'content-type', 'application/grpc'],
        body: Buffer.from([0, 0, 0, 0, 0]),
      });
      expect(res.status).toBe(200);
      expect(res.headers['grpc-status']).toBe('12');
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_NOT_HTTP2');
      expect(decodeURIComponent(String(res.headers['grpc-message']))).toContain('--h2c');
      expect(plain.sessions).toBe(0);
    } finally {
      await h1.close(0);
      await plain.close();
    }
  });
});
