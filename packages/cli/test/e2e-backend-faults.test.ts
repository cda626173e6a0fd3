import { buildEdge, type EdgeOptions } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { okResponse, type RawBackend, startRawBackend } from './support/raw-backend.js';
import { silent } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An edge and an agent in front of a raw backend; returns the edge port and the tunnel's Host. */
async function tunnelTo(backend: RawBackend, name: string, edgeOptions: EdgeOptions = {}) {
  const edge = buildEdge({ port: 0, logger: silent, ...edgeOptions });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const tunnel = await connect({ target: `127.0.0.1:${backend.port}`, server: url, subdomain: name });
  cleanups.push(() => tunnel.close(0));
  return { port, host: `${name}.localhost:${port}` };
}

describe('backend faults', () => {
  it('keep-alive race: a GET on a pooled connection the backend closes is retried once; a POST is never replayed', async () => {
    // The backend answers the first request on each connection and keeps it open, then drops the next
    // request on that connection without a byte — exactly what a backend closing an idle keep-alive
    // connection at the moment a request goes out looks like from the agent.
    const backend = await startRawBackend((socket, request) => {
      if (request.onConnection === 1) socket.write(okResponse(request.path));
      else socket.destroy();
    });
    cleanups.push(() => backend.close());
    const { port, host } = await tunnelTo(backend, 'race');
    const receipts = (path: string) => backend.received.filter((r) => r.path === path);

    expect((await send({ port, path: '/prime', headers: ['Host', host] })).status).toBe(200);
    const get = await send({ port, path: '/get', headers: ['Host', host] });
    expect(get.status).toBe(200);
    expect(get.body.toString()).toBe('/get');
    // Sent on the pooled connection (dropped), then once more on a fresh one (answered).
    expect(receipts('/get').map((r) => r.onConnection)).toEqual([2, 1]);

    // The pool hands the next request to its first connection again: prime it, then POST on it.
    expect((await send({ port, path: '/prime2', headers: ['Host', host] })).status).toBe(200);
    const post = await send({
      port,
      path: '/post',
      method: 'POST',
      headers: ['Host', host, 'Content-Type', 'text/plain'],
      body: Buffer.from('pay once'),
    });
    expect(post.status).toBe(502);
    expect(receipts('/post')).toHaveLength(1);
    expect(receipts('/post')[0]!.onConnection).toBe(2);

    // Idempotent or not, a second failure is not retried again: one replay at most.
    const dead = await startRawBackend((socket) => socket.destroy());
    cleanups.push(() => dead.close());
    const second = await tunnelTo(dead, 'dead');
    const res = await send({ port: second.port, path: '/twice', headers: ['Host', second.host] });
    expect(res.status).toBe(502);
    expect(dead.received.filter((r) => r.path === '/twice')).toHaveLength(2);
  });

  it('a malformed response head → 502 TUNNEL2_ERR_BACKEND_INVALID_RESPONSE, and the edge keeps serving', async () => {
    const backend = await startRawBackend((socket, request) => {
      if (request.path === '/garbage') socket.end('HTTP/1.1 two hundred\r\nno colon here\r\n\r\n');
      else socket.write(okResponse());
    });
    cleanups.push(() => backend.close());
    const { port, host } = await tunnelTo(backend, 'malformed');
    const res = await send({ port, path: '/garbage', headers: ['Host', host] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_INVALID_RESPONSE');
    expect(res.body.toString()).toContain('malformed response');
    expect((await send({ port, path: '/fine', headers: ['Host', host] })).status).toBe(200);
  });

  it.each([
    {
      fault: 'a duplicate Content-Length',
      bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
      message: 'sent a malformed response',
    },
    {
      fault: 'a close mid-head',
      bytes: 'HTTP/1.1 200 OK\r\nContent-Type: text/pl',
      message: 'closed the connection before completing its response head',
    },
    {
      fault: 'a 200 KB head',
      bytes: `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(200 * 1024)}\r\nContent-Length: 2\r\n\r\nok`,
      message: 'sent a response head larger than',
    },
  ])(
    'a backend reached that answers with $fault → 502 TUNNEL2_ERR_BACKEND_INVALID_RESPONSE',
    async ({ bytes, message }) => {
      const backend = await startRawBackend((socket, request) => {
        if (request.path === '/bad') socket.end(bytes, 'latin1');
        else socket.write(okResponse());
      });
      cleanups.push(() => backend.close());
      const { port, host } = await tunnelTo(backend, 'invalid');
      // Through undici, and through node:http (the path of Expect: 100-continue requests).
      for (const headers of [
        ['Host', host],
        ['Host', host, 'Expect', '100-continue'],
      ]) {
        const res = await send({ port, path: '/bad', headers });
        expect(res.status).toBe(502);
        expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_INVALID_RESPONSE');
        expect(res.body.toString()).toContain(message);
      }
      // The backend got each request: a broken answer is not a stale connection, so none was sent again.
      expect(backend.received.filter((r) => r.path === '/bad')).toHaveLength(2);
      expect((await send({ port, path: '/fine', headers: ['Host', host] })).status).toBe(200);
    },
  );

  // Issue #29 (weakness): a backend that took the request and died was reported as "refused connection"
  // (the replay of a GET found the port closed) — which sends the user looking for a wrong port.
  it('a backend that accepts a request and closes without a byte → 502 TUNNEL2_ERR_BACKEND_CLOSED, "closed the connection before answering"', async () => {
    const closing = await startRawBackend((socket) => socket.destroy());
    cleanups.push(() => closing.close());
    const { port, host } = await tunnelTo(closing, 'closing');
    const said = `tunnel2: backend on 127.0.0.1:${closing.port} closed the connection before answering`;
    // A GET (replayed once), a POST (never replayed), and the node:http path (Expect: 100-continue).
    for (const request of [
      { path: '/get', headers: ['Host', host] },
      { path: '/post', method: 'POST', headers: ['Host', host], body: Buffer.from('once') },
      {
        path: '/expect',
        method: 'PUT',
        headers: ['Host', host, 'Expect', '100-continue'],
        body: Buffer.from('x'),
      },
    ]) {
      const res = await send({ port, ...request });
      expect(res.status).toBe(502);
      expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_CLOSED');
      expect(res.body.toString()).toMatch(new RegExp(`^${said} \\((UND_ERR_SOCKET|ECONNRESET)\\)\n$`));
    }

    // The backend dies with the request: the replay of the GET finds its port closed (ECONNREFUSED), but
    // what happened to the request is that the backend took it and closed the connection.
    const dying: { backend?: RawBackend } = {};
    dying.backend = await startRawBackend((socket) => {
      socket.destroy();
      void dying.backend?.close();
    });
    cleanups.push(() => dying.backend?.close());
    const died = await tunnelTo(dying.backend, 'dying');
    const res = await send({ port: died.port, path: '/dies', headers: ['Host', died.host] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_CLOSED');
    expect(res.body.toString()).toContain(
      `backend on 127.0.0.1:${dying.backend.port} closed the connection before answering`,
    );
    expect(res.body.toString()).not.toContain('refused');
  });

  it('a backend that stalls mid-body: the client sees the response aborted once the idle timeout passes', async () => {
    const backend = await startRawBackend((socket) => {
      // Promises 1000 bytes, sends 10, then goes silent with the connection open.
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789');
    });
    cleanups.push(() => backend.close());
    const { port, host } = await tunnelTo(backend, 'stall', { idleTimeoutMs: 500 });
    const started = performance.now();
    await expect(send({ port, path: '/stall', headers: ['Host', host] })).rejects.toThrow(
      /aborted|socket hang up|ECONNRESET/,
    );
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(10_000);
  });
});
