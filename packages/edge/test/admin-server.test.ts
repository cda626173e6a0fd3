import { request } from 'node:http';
import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge, type Edge } from '../src/build-edge.js';
import { type AdminServer, startAdminServer } from '../src/operations/admin-server.js';
import { createEdgeMetrics, type EdgeMetrics } from '../src/operations/metrics.js';

const silent = pino({ level: 'silent' });
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function call(
  url: string,
  method = 'GET',
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    request(url, { method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    })
      .on('error', reject)
      .end();
  });
}

async function start(
  registry: SessionRegistry,
  accepting: () => boolean,
): Promise<{ admin: AdminServer; edge: Edge; metrics: EdgeMetrics }> {
  const edge = buildEdge({ port: 0, logger: silent, registry });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  const metrics = createEdgeMetrics(edge, '0.0.0-test');
  cleanups.push(() => metrics.close());
  const admin = await startAdminServer(
    { metrics, registry, accepting, registryTimeoutMs: 500 },
    { host: '127.0.0.1', port: 0 },
    silent,
  );
  cleanups.push(() => admin.close());
  return { admin, edge, metrics };
}

describe('admin server', () => {
  it('answers the three paths, HEAD without a body, 404 elsewhere and 405 for other methods', async () => {
    const registry = createMemoryRegistry();
    cleanups.push(() => registry.close());
    const { admin } = await start(registry, () => true);
    expect(await call(`${admin.url}/healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    const head = await call(`${admin.url}/healthz`, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['content-length']).toBe('3');
    expect(await call(`${admin.url}/readyz?verbose=1`)).toMatchObject({ status: 200 });
    const metrics = await call(`${admin.url}/metrics`);
    expect(metrics.body).toContain('# TYPE tunnel2_http_requests_total counter');
    expect(metrics.headers['cache-control']).toBe('no-store');
    expect((await call(`${admin.url}/`)).status).toBe(404);
    const post = await call(`${admin.url}/metrics`, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
  });

  it('is not ready while the edge does not accept work, nor when the registry cannot answer', async () => {
    const registry = createMemoryRegistry();
    let accepting = false;
    const { admin } = await start(registry, () => accepting);
    const before = await call(`${admin.url}/readyz`);
    expect(before.status).toBe(503);
    expect(JSON.parse(before.body)).toEqual({ ready: false, accepting: false, registry: 'ok' });
    accepting = true;
    expect((await call(`${admin.url}/readyz`)).status).toBe(200);
    await registry.close();
    const broken = await call(`${admin.url}/readyz`);
    expect(broken.status).toBe(503);
    expect(JSON.parse(broken.body)).toEqual({
      ready: false,
      accepting: true,
      registry: 'the session registry is closed',
    });
    // Liveness never depends on the registry: a restart would not fix it.
    expect((await call(`${admin.url}/healthz`)).status).toBe(200);
  });

  it('refuses to start on a port in use, with the error of the listen', async () => {
    const registry = createMemoryRegistry();
    cleanups.push(() => registry.close());
    const { admin, metrics } = await start(registry, () => true);
    const port = Number(new URL(admin.url).port);
    await expect(
      startAdminServer({ metrics, registry, accepting: () => true }, { host: '127.0.0.1', port }, silent),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });
});
