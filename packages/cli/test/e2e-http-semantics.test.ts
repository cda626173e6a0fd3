import { once } from 'node:events';
import { type IncomingMessage, request } from 'node:http';
import { connect as netConnect } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type SemanticsBackend, startSemanticsBackend } from './support/semantics-backend.js';
import { silent } from './support/stack.js';

let backend: SemanticsBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
const host = () => `sem.localhost:${port}`;

beforeAll(async () => {
  backend = await startSemanticsBackend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'sem' });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

/** Sends raw bytes on one connection and collects everything until the peer closes or `until` matches. */
async function raw(bytes: string, until?: RegExp): Promise<string> {
  const socket = netConnect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(bytes);
  let text = '';
  return new Promise((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (until?.test(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('close', () => resolve(text));
  });
}

describe('HTTP semantics through the tunnel', () => {
  it('delivers each SSE event within 50 ms of being written', async () => {
    const delays: number[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port,
        path: '/sse?count=10&interval=100',
        headers: { host: host() },
      });
      req.on('error', reject);
      req.on('response', (res: IncomingMessage) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        let buffer = '';
        res.on('data', (chunk: Buffer) => {
          const now = Date.now();
          buffer += chunk.toString();
          let end = buffer.indexOf('\n\n');
          while (end !== -1) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const written = Number(/data: (\d+)/.exec(event)?.[1]);
            delays.push(now - written);
            end = buffer.indexOf('\n\n');
          }
        });
        res.on('end', () => resolve());
      });
      req.end();
    });
    expect(delays).toHaveLength(10);
    expect(Math.max(...delays)).toBeLessThan(50);
  });

  it('relays 100 Continue, so the body is sent only when the backend asks for it', async () => {
    const text = await raw(
      `POST /expect/accept HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n`,
      /100 Continue\r\n\r\n/,
    );
    expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n/);
    // The whole exchange, with the body after the 100:
    const result = await new Promise<{ status: number; body: string; sawContinue: boolean }>(
      (resolve, reject) => {
        const req = request({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/expect/accept',
          headers: { host: host(), expect: '100-continue', 'content-length': 5 },
        });
        let sawContinue = false;
        req.on('continue', () => {
          sawContinue = true;
          req.end('hello');
        });
        req.on('error', reject);
        req.on('response', (res) => {
          let body = '';
          res.on('data', (c: Buffer) => {
            body += c.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, sawContinue }));
        });
      },
    );
    expect(result).toEqual({ status: 200, body: 'received 5 bytes', sawContinue: true });
  });

  it("relays the backend's early final answer to Expect: 100-continue without the body being sent", async () => {
    const text = await raw(
      `PUT /expect/reject HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n`,
      /do not send it/,
    );
    expect(text).toMatch(/^HTTP\/1\.1 417 /);
    expect(text).not.toContain('100 Continue');
  });

  it('relays 103 Early Hints, then delivers the final response intact', async () => {
    // More 1xx cases (both URL forms, 102, HTTP/1.0 clients) are in e2e-interim-and-trailers.test.ts.
    const text = await raw(`GET /early-hints HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 103 Early Hints\r\nLink: [^\r]*<\/style\.css>/);
    expect(text).toMatch(/\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(text).toContain('after hints');
  });

  it('HEAD, 204 and 304 carry no body and the next keep-alive request on the connection still works', async () => {
    const text = await raw(
      `HEAD /head HTTP/1.1\r\nHost: ${host()}\r\n\r\n` +
        `GET /no-content HTTP/1.1\r\nHost: ${host()}\r\n\r\n` +
        `GET /not-modified HTTP/1.1\r\nHost: ${host()}\r\n\r\n` +
        `GET /head HTTP/1.1\r\nHost: ${host()}\r\n\r\n`,
      /hello there$/,
    );
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '204', '304', '200']);
    // Only the last response has a body.
    expect(text.split('hello there')).toHaveLength(2);
    expect(text).toMatch(/content-length: 11/i);
  });

  it('rejects Transfer-Encoding together with Content-Length with 400, never reaching the backend', async () => {
    const before = backend.received.length;
    const text = await raw(
      `POST /expect/accept HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(backend.received.length).toBe(before);
  });

  it('rejects malformed framing with 400', async () => {
    const text = await raw(`GET / HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: abc\r\n\r\n`);
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('routes an absolute-form target by its authority and sends only its path to the backend', async () => {
    const text = await raw(
      `GET http://sem.localhost:${port}/head HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toContain('hello there');
    const elsewhere = await raw(
      `GET http://evil.example/head HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`,
    );
    expect(elsewhere).toMatch(/^HTTP\/1\.1 404 /);
    expect(elsewhere).not.toContain('hello there');
  });
});
