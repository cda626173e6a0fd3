import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BYTES_CHUNK_SIZE,
  createTestBackend,
  deterministicChunks,
  deterministicSha256,
  endpoints,
  type TestBackend,
} from '../src/index.js';
import { headerValues, json, send, sha256 } from './support/http.js';

let backend: TestBackend;
beforeAll(async () => {
  backend = await createTestBackend();
});
afterAll(() => backend.close());

const get = (path: string, options?: Parameters<typeof send>[2]) => send(backend.url, path, options);

/** The first `n` deterministic bytes, for small n. */
const firstBytes = (n: number): Buffer => Buffer.concat([...deterministicChunks(n)]);

describe('load-test endpoints', () => {
  it('/loadtest/ping answers "pong"', async () => {
    const reply = await get('/loadtest/ping');
    expect(reply.status).toBe(200);
    expect(reply.body.toString()).toBe('pong');
    expect(reply.headers).toMatchObject({ 'content-type': 'text/plain', 'content-length': '4' });
  });

  it('/loadtest/get answers ~400 B of JSON with a Content-Length', async () => {
    const reply = await get('/loadtest/get');
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers['content-length']).toBe(String(reply.body.length));
    expect(reply.body.length).toBeGreaterThan(300);
    expect(reply.body.length).toBeLessThan(500);
    expect(json<{ id: number }>(reply).id).toBe(42);
  });

  it('/loadtest/fast answers small JSON', async () => {
    expect(json(await get('/loadtest/fast'))).toEqual({ ok: true, message: 'fast' });
  });

  it('/loadtest/info lists every endpoint', async () => {
    const info = json<{ endpoints: { path: string }[] }>(await get('/loadtest/info'));
    expect(info.endpoints).toEqual(JSON.parse(JSON.stringify(endpoints)));
    const paths = info.endpoints.map((e) => e.path);
    for (const path of [
      '/loadtest/ping',
      '/bytes/:n',
      '/stream/:chunks',
      '/echo/request/*',
      '/abort-after/:n',
    ]) {
      expect(paths).toContain(path);
    }
  });

  it('/loadtest/delay/:ms answers after the delay; bad delays are 400', async () => {
    const started = performance.now();
    const reply = await get('/loadtest/delay/50');
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    expect(json(reply)).toEqual({ delayedMs: 50 });
    expect((await get('/loadtest/delay/0')).status).toBe(200);
    for (const bad of ['abc', '60001', '-1', '1e3', '0x10', '%20']) {
      expect((await get(`/loadtest/delay/${bad}`)).status).toBe(400);
    }
  });

  it('/loadtest/echo echoes the body with its content-type', async () => {
    const reply = await get('/loadtest/echo', {
      method: 'POST',
      body: 'hello world',
      headers: ['Content-Type', 'text/x-test'],
    });
    expect(reply.body.toString()).toBe('hello world');
    expect(reply.headers['content-type']).toBe('text/x-test');
    expect(reply.headers['content-length']).toBe('11');
  });

  it('/loadtest/echo streams: the first piece comes back before the request has ended', async () => {
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = request(`${backend.url}/loadtest/echo`, { method: 'POST', agent: false });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (piece: string) => {
          // Only after the first piece came back is the rest of the request sent.
          if (text === '') req.end('second');
          text += piece;
        });
        res.on('end', () => resolve(text));
      });
      req.flushHeaders();
      req.write('first,');
    });
    expect(echoed).toBe('first,second');
  });

  it('/loadtest/echo carries 16 MiB intact (backpressure both ways)', async () => {
    const body = firstBytes(16 * 1024 * 1024);
    const reply = await get('/loadtest/echo', { method: 'POST', body });
    expect(reply.body.length).toBe(body.length);
    expect(sha256(reply.body)).toBe(sha256(body));
  });

  it('answers a known path with the wrong method 405 and Allow', async () => {
    const reply = await get('/loadtest/echo');
    expect(reply.status).toBe(405);
    expect(reply.headers.allow).toBe('POST');
    expect((await get('/upload')).headers.allow).toBe('POST, PUT');
  });
});

describe('/bytes/:n', () => {
  for (const n of [0, 1, BYTES_CHUNK_SIZE - 1, BYTES_CHUNK_SIZE, BYTES_CHUNK_SIZE + 1, 5 * 1024 * 1024]) {
    it(`streams ${n} deterministic bytes with Content-Length`, async () => {
      const reply = await get(`/bytes/${n}`);
      expect(reply.status).toBe(200);
      expect(reply.headers['content-length']).toBe(String(n));
      expect(reply.body.length).toBe(n);
      expect(sha256(reply.body)).toBe(deterministicSha256(n));
    });
  }

  it('?chunked=1 omits Content-Length and sends the same bytes', async () => {
    const reply = await get('/bytes/1000000?chunked=1');
    expect(reply.headers['content-length']).toBeUndefined();
    expect(reply.headers['transfer-encoding']).toBe('chunked');
    expect(sha256(reply.body)).toBe(deterministicSha256(1_000_000));
  });

  it('declares 2^31 and more without building the body (HEAD, and the start of a GET)', async () => {
    const head = await get(`/bytes/${2 ** 32 + 5}`, { method: 'HEAD' });
    expect(head.headers['content-length']).toBe(String(2 ** 32 + 5));
    expect(head.body.length).toBe(0);
    const start = await new Promise<{ length: string | undefined; first: Buffer }>((resolve, reject) => {
      const req = request(`${backend.url}/bytes/${2 ** 31}`, { agent: false });
      req.on('error', () => {});
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let received = 0;
        res.on('error', () => {});
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          received += chunk.length;
          if (received >= 1_000_000) {
            req.destroy();
            resolve({ length: res.headers['content-length'], first: Buffer.concat(chunks) });
          }
        });
        res.on('end', () => reject(new Error('2 GiB arrived?')));
      });
      req.end();
    });
    expect(start.length).toBe(String(2 ** 31));
    expect(start.first.equals(firstBytes(start.first.length))).toBe(true);
  });

  it('refuses a bad count with 400', async () => {
    for (const bad of ['-1', 'abc', '1.5', String(2 ** 40 + 1), '99999999999999999']) {
      expect((await get(`/bytes/${bad}`)).status).toBe(400);
    }
  });
});

describe('/stream/:chunks', () => {
  it('sends the chunks apart in time, chunked: the first arrives well before the end', async () => {
    const result = await new Promise<{ text: string; first: number; end: number; te: unknown }>(
      (resolve, reject) => {
        const req = request(`${backend.url}/stream/4?interval=40`, { agent: false });
        req.on('error', reject);
        req.on('response', (res) => {
          let text = '';
          let first = 0;
          res.on('data', (chunk: Buffer) => {
            if (first === 0) first = performance.now();
            text += chunk.toString();
          });
          res.on('end', () =>
            resolve({ text, first, end: performance.now(), te: res.headers['transfer-encoding'] }),
          );
        });
        req.end();
      },
    );
    expect(result.text).toBe('chunk 0\nchunk 1\nchunk 2\nchunk 3\n');
    expect(result.te).toBe('chunked');
    expect(result.end - result.first).toBeGreaterThanOrEqual(100);
  });

  it('sends back-to-back chunks without an interval, and none for 0', async () => {
    const many = await get('/stream/1000');
    expect(many.body.toString().split('\n')).toHaveLength(1001);
    const none = await get('/stream/0');
    expect(none.status).toBe(200);
    expect(none.body.length).toBe(0);
  });

  it('refuses bad counts and intervals with 400', async () => {
    expect((await get('/stream/x')).status).toBe(400);
    expect((await get('/stream/100001')).status).toBe(400);
    expect((await get('/stream/1?interval=-5')).status).toBe(400);
    expect((await get('/stream/1?interval=60001')).status).toBe(400);
  });
});

interface Echo {
  method: string;
  url: string;
  httpVersion: string;
  rawHeaders: string[];
  bodyLength: number;
  bodySha256: string;
}

describe('/echo/request', () => {
  it('describes the request exactly as it arrived: method, url, raw headers, body', async () => {
    const echo = json<Echo>(
      await get('/echo/request?a=1&b=x%20y', {
        method: 'PUT',
        body: 'abc',
        headers: ['X-Test', 'yes', 'x-multi', 'one', 'X-MULTI', 'two', 'Content-Type', 'text/plain'],
      }),
    );
    expect(echo).toMatchObject({
      method: 'PUT',
      url: '/echo/request?a=1&b=x%20y',
      httpVersion: '1.1',
      bodyLength: 3,
      bodySha256: sha256('abc'),
    });
    const i = echo.rawHeaders.indexOf('X-Test');
    expect(echo.rawHeaders.slice(i, i + 2)).toEqual(['X-Test', 'yes']);
    expect(echo.rawHeaders).toContain('X-MULTI');
    expect(headerValues(echo.rawHeaders, 'x-multi')).toEqual(['one', 'two']);
  });

  it('serves any method and any sub-path, keeping percent-encoding byte for byte', async () => {
    for (const method of ['GET', 'POST', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND']) {
      const echo = json<Echo>(await get('/echo/request/%E2%9C%93/a%2Fb/%25?q=%26%3D', { method }));
      expect(echo).toMatchObject({
        method,
        url: '/echo/request/%E2%9C%93/a%2Fb/%25?q=%26%3D',
        bodyLength: 0,
      });
    }
    expect((await get('/echo/requestX')).status).toBe(404);
  });

  it('hashes a large body as it streams', async () => {
    const body = firstBytes(5 * 1024 * 1024 + 3);
    const echo = json<Echo>(await get('/echo/request', { method: 'POST', body }));
    expect(echo.bodyLength).toBe(body.length);
    expect(echo.bodySha256).toBe(sha256(body));
  });
});

describe('other fixtures', () => {
  it('/discard answers { bytes } for POST and PUT without hashing', async () => {
    expect(json(await get('/discard', { method: 'POST', body: 'payload' }))).toEqual({ bytes: 7 });
    expect(json(await get('/discard', { method: 'PUT', body: Buffer.alloc(300_000, 1) }))).toEqual({
      bytes: 300_000,
    });
    expect(json(await get('/discard', { method: 'POST' }))).toEqual({ bytes: 0 });
  });

  it('/upload answers { bytes, sha256 } for POST and PUT', async () => {
    expect(json(await get('/upload', { method: 'POST', body: 'payload' }))).toEqual({
      bytes: 7,
      sha256: sha256('payload'),
    });
    const body = firstBytes(3_000_000);
    expect(json(await get('/upload', { method: 'PUT', body }))).toEqual({
      bytes: body.length,
      sha256: sha256(body),
    });
    expect(json(await get('/upload', { method: 'POST' }))).toEqual({ bytes: 0, sha256: sha256('') });
  });

  it('/headers/multi sends each Set-Cookie and X-Multi value as its own header line', async () => {
    const reply = await get('/headers/multi');
    expect(headerValues(reply.rawHeaders, 'set-cookie')).toEqual(['a=1; Path=/', 'b=2; Path=/; HttpOnly']);
    expect(headerValues(reply.rawHeaders, 'x-multi')).toEqual(['a', 'b']);
  });

  it('/status/:code answers that status, without a body where HTTP forbids one', async () => {
    for (const status of [200, 201, 302, 404, 418, 500, 503, 599]) {
      const reply = await get(`/status/${status}`);
      expect(reply.status).toBe(status);
      expect(json(reply)).toEqual({ status });
    }
    for (const status of [204, 205, 304]) {
      const reply = await get(`/status/${status}`);
      expect(reply.status).toBe(status);
      expect(reply.body.length).toBe(0);
    }
    for (const bad of ['100', '199', '600', 'abc']) expect((await get(`/status/${bad}`)).status).toBe(400);
  });

  it('answers unknown paths 404 with JSON naming the path', async () => {
    const reply = await get('/nowhere/at/all?x=1');
    expect(reply.status).toBe(404);
    expect(json(reply)).toMatchObject({ method: 'GET', path: '/nowhere/at/all', url: '/nowhere/at/all?x=1' });
  });

  it('keeps a connection alive across many requests', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const before = backend.stats.requests;
    for (let i = 0; i < 20; i++) {
      expect((await get('/loadtest/ping', { agent })).body.toString()).toBe('pong');
    }
    expect(backend.stats.requests - before).toBe(20);
    agent.destroy();
  });
});

describe('failures', () => {
  it('/abort-after/:n sends n bytes of a longer declared body, then drops the connection', async () => {
    const abortsBefore = backend.stats.aborted;
    for (const n of [0, 1000, 300_000]) {
      const result = await new Promise<{ length: unknown; body: Buffer; complete: boolean }>((resolve) => {
        const req = request(`${backend.url}/abort-after/${n}`, { agent: false });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', () => {});
          res.on('close', () =>
            resolve({
              length: res.headers['content-length'],
              body: Buffer.concat(chunks),
              complete: res.complete,
            }),
          );
        });
        req.on('error', () => {});
        req.end();
      });
      expect(result.length).toBe(String(2 * n + 1));
      expect(result.complete).toBe(false);
      expect(result.body.equals(firstBytes(n))).toBe(true);
    }
    // Dropped on purpose by the backend: not a client that went away.
    expect(backend.stats.aborted).toBe(abortsBefore);
  });

  it('sees a client that goes away mid-download (stats and event)', async () => {
    const path = `/bytes/${2 ** 30}`;
    const aborted = backend.nextAbort('/bytes/');
    const before = backend.stats.aborted;
    const req = request(`${backend.url}${path}`, { agent: false });
    req.on('error', () => {});
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.end();
    expect(await aborted).toBe(path);
    expect(backend.stats.aborted).toBe(before + 1);
  });

  it('sees a client that goes away while a response is delayed, and drops the timer', async () => {
    const aborted = new Promise<string>((resolve) => backend.events.once('aborted', resolve));
    const req = request(`${backend.url}/loadtest/delay/60000`, { agent: false });
    req.on('error', () => {});
    req.end();
    // Destroy once the backend has the request (it counts it in flight), not at an arbitrary time.
    await new Promise<void>((resolve) => backend.server.once('request', () => resolve()));
    req.destroy();
    expect(await aborted).toBe('/loadtest/delay/60000');
  });

  it('sees a client that goes away mid-upload', async () => {
    const aborted = backend.nextAbort('/upload');
    const req = request(`${backend.url}/upload`, { method: 'POST', agent: false });
    req.on('error', () => {});
    req.write(firstBytes(100_000));
    await new Promise<void>((resolve) => backend.server.once('request', () => resolve()));
    req.destroy();
    expect(await aborted).toBe('/upload');
  });
});

describe('lifecycle', () => {
  it('close() is quick with kept-alive and in-flight connections open, and idempotent', async () => {
    const other = await createTestBackend();
    const agent = new Agent({ keepAlive: true });
    expect((await send(other.url, '/loadtest/ping', { agent })).status).toBe(200);
    const inFlight = send(other.url, '/loadtest/delay/60000').catch((err: unknown) => err);
    await new Promise<void>((resolve) => other.server.once('request', () => resolve()));
    expect(other.stats.inFlight).toBe(1);
    const started = performance.now();
    await Promise.all([other.close(), other.close()]);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await inFlight).toBeInstanceOf(Error);
    expect(other.stats.aborted).toBe(0);
    await expect(send(other.url, '/loadtest/ping')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    agent.destroy();
  });

  it('validates its options and reports a port in use', async () => {
    await expect(createTestBackend({ port: 70_000 })).rejects.toMatchObject({
      code: 'TUNNEL2_ERR_TEST_BACKEND_INVALID_ARGUMENT',
    });
    await expect(createTestBackend({ port: backend.port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  it('listens on an explicit host, and brackets IPv6 in its url', async () => {
    const v6 = await createTestBackend({ host: '::1' }).catch(() => undefined);
    if (v6 === undefined) return; // no IPv6 loopback in this environment
    expect(v6.url).toBe(`http://[::1]:${v6.port}`);
    expect((await send(v6.url, '/loadtest/ping')).body.toString()).toBe('pong');
    await v6.close();
  });
});
