import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestBackend, deterministicSha256, endpoints, type TestBackend } from '../src/index.js';

let backend: TestBackend;
beforeAll(async () => {
  backend = await createTestBackend();
});
afterAll(() => backend.close());

async function get(path: string, init?: RequestInit) {
  const res = await fetch(`${backend.url}${path}`, init);
  const body = Buffer.from(await res.arrayBuffer());
  return { res, body };
}

describe('test backend endpoints', () => {
  it('serves the load-test endpoints', async () => {
    expect((await get('/loadtest/ping')).body.toString()).toBe('pong');
    const item = await get('/loadtest/get');
    expect(item.res.headers.get('content-type')).toBe('application/json');
    expect(item.body.length).toBeGreaterThan(300);
    expect(item.body.length).toBeLessThan(500);
    expect(JSON.parse((await get('/loadtest/fast')).body.toString())).toEqual({ ok: true, message: 'fast' });
    const info = JSON.parse((await get('/loadtest/info')).body.toString()) as { endpoints: unknown[] };
    expect(info.endpoints).toHaveLength(endpoints.length);
  });

  it('delays and rejects bad delays', async () => {
    const started = performance.now();
    expect((await get('/loadtest/delay/50')).res.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    expect((await get('/loadtest/delay/abc')).res.status).toBe(400);
    expect((await get('/loadtest/delay/60001')).res.status).toBe(400);
  });

  it('echoes a body', async () => {
    const { body } = await get('/loadtest/echo', { method: 'POST', body: 'hello world' });
    expect(body.toString()).toBe('hello world');
  });

  for (const n of [0, 1, 65_535, 65_537, 5 * 1024 * 1024]) {
    it(`/bytes/${n} streams n deterministic bytes`, async () => {
      const { res, body } = await get(`/bytes/${n}`);
      expect(res.headers.get('content-length')).toBe(String(n));
      expect(body.length).toBe(n);
      expect(createHash('sha256').update(body).digest('hex')).toBe(deterministicSha256(n));
    });
  }

  it('/bytes?chunked=1 omits Content-Length; bad sizes are 400', async () => {
    const { res, body } = await get('/bytes/1000?chunked=1');
    expect(res.headers.get('content-length')).toBeNull();
    expect(body.length).toBe(1000);
    expect((await get('/bytes/-1')).res.status).toBe(400);
  });

  it('describes requests as it saw them', async () => {
    const { body } = await get('/echo/request?x=1', {
      method: 'PUT',
      body: 'abc',
      headers: { 'X-Test': 'yes' },
    });
    const echo = JSON.parse(body.toString()) as {
      method: string;
      url: string;
      rawHeaders: string[];
      bodyLength: number;
    };
    expect(echo).toMatchObject({ method: 'PUT', url: '/echo/request?x=1', bodyLength: 3 });
    expect(echo.rawHeaders).toContain('yes');
  });

  it('answers uploads with their size and hash', async () => {
    const { body } = await get('/upload', { method: 'POST', body: 'payload' });
    expect(JSON.parse(body.toString())).toEqual({
      bytes: 7,
      sha256: createHash('sha256').update('payload').digest('hex'),
    });
  });

  it('sends repeated headers separately, statuses on demand, and 404 naming the path', async () => {
    const multi = await get('/headers/multi');
    expect(multi.res.headers.getSetCookie()).toHaveLength(2);
    expect((await get('/status/418')).res.status).toBe(418);
    expect((await get('/status/204')).res.status).toBe(204);
    const missing = await get('/nowhere');
    expect(missing.res.status).toBe(404);
    expect(missing.body.toString()).toContain('/nowhere');
  });

  it('streams chunks apart in time', async () => {
    const { body } = await get('/stream/3?interval=10');
    expect(body.toString()).toBe('chunk 0\nchunk 1\nchunk 2\n');
  });

  it('/abort-after/n drops the connection after n bytes of a longer body', async () => {
    await expect(get('/abort-after/1000')).rejects.toThrow();
  });

  it('reports a client that goes away mid-response', async () => {
    const aborted = new Promise<string>((resolve) => backend.events.once('aborted', resolve));
    const req = request(`${backend.url}/bytes/${1024 * 1024 * 1024}`);
    req.on('error', () => {});
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.end();
    expect(await aborted).toBe(`/bytes/${1024 * 1024 * 1024}`);
    expect(backend.stats.aborted).toBeGreaterThanOrEqual(1);
  });
});

it('close() returns promptly even with kept-alive connections', async () => {
  const other = await createTestBackend();
  const res = await fetch(`${other.url}/loadtest/ping`);
  await res.text();
  await other.close();
  await expect(fetch(`${other.url}/loadtest/ping`)).rejects.toThrow();
});
