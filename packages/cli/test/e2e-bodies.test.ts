import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send, sha256 } from './support/http-client.js';
import { type Stack, startStack } from './support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ name: 'bodies' });
});
afterAll(() => stack.close());

const sizes = [0, 1, 64 * 1024, 50 * 1024 * 1024];

/** Yields `data` in uneven pieces, so the request goes out chunked. */
function chunked(data: Buffer): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (offset >= data.length) {
        this.push(null);
        return;
      }
      const size = Math.min(data.length - offset, 1 + ((offset * 7919) % 100_000));
      this.push(data.subarray(offset, offset + size));
      offset += size;
    },
  });
}

describe('bodies are byte-exact through the tunnel', () => {
  for (const size of sizes) {
    it(`upload of ${size} bytes with Content-Length`, async () => {
      const data = randomBytes(size);
      const res = await send({
        port: stack.port,
        path: '/upload',
        method: 'POST',
        headers: [
          'Host',
          stack.host,
          'Content-Length',
          String(size),
          'Content-Type',
          'application/octet-stream',
        ],
        body: data,
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString())).toEqual({ bytes: size, sha256: sha256(data) });
    });

    it(`upload of ${size} bytes chunked`, async () => {
      const data = randomBytes(size);
      const res = await send({
        port: stack.port,
        path: '/upload',
        method: 'PUT',
        headers: ['Host', stack.host, 'Transfer-Encoding', 'chunked'],
        body: chunked(data),
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString())).toEqual({ bytes: size, sha256: sha256(data) });
    });

    it(`download of ${size} bytes with Content-Length and chunked`, async () => {
      const direct = await send({ port: stack.backend.port, path: `/bytes/${size}`, keepBody: false });
      const viaLength = await send({
        port: stack.port,
        path: `/bytes/${size}`,
        headers: ['Host', stack.host],
        keepBody: false,
      });
      expect(viaLength.status).toBe(200);
      expect(viaLength.headers['content-length']).toBe(String(size));
      expect(viaLength.length).toBe(size);
      expect(viaLength.sha256).toBe(direct.sha256);
      const viaChunked = await send({
        port: stack.port,
        path: `/bytes/${size}?chunked=1`,
        headers: ['Host', stack.host],
        keepBody: false,
      });
      expect(viaChunked.headers['transfer-encoding']).toBe('chunked');
      expect(viaChunked.sha256).toBe(direct.sha256);
    });
  }

  it('echoes a 50 MiB body streamed both ways at once', async () => {
    const data = randomBytes(50 * 1024 * 1024);
    const res = await send({
      port: stack.port,
      path: '/loadtest/echo',
      method: 'POST',
      headers: ['Host', stack.host, 'Content-Type', 'application/octet-stream'],
      body: chunked(data),
      keepBody: false,
    });
    expect(res.length).toBe(data.length);
    expect(res.sha256).toBe(sha256(data));
  });

  it("a streamed response's first chunk reaches the client before the backend has finished", async () => {
    const firstChunkAt = await new Promise<{ first: number; end: number }>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: stack.port,
        path: '/stream/5?interval=300',
        headers: { host: stack.host },
        agent: false,
      });
      req.on('error', reject);
      req.on('response', (res) => {
        let first = 0;
        res.on('data', () => {
          if (first === 0) first = performance.now();
        });
        res.on('end', () => resolve({ first, end: performance.now() }));
      });
      req.end();
    });
    // 5 chunks 300 ms apart: the first must arrive well before the last (at least 3 intervals earlier).
    expect(firstChunkAt.end - firstChunkAt.first).toBeGreaterThan(900);
  });
});
