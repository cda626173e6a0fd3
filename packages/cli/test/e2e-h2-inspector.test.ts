import { buildEdge, type Edge } from '@tunnel2/edge';
import type { Entry, EntrySummary } from '@tunnel2/inspector';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

// The inspector records an exchange with an HTTP/2 backend as it records one over HTTP/1.1: the request
// head and body, the status, the response head and body.

let backend: H2TestBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  backend = await startH2Backend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({
    target: backend.port,
    server: edge.url,
    subdomain: 'h2-inspected',
    h2c: true,
    inspect: { port: 0 },
  });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

async function api<T>(path: string): Promise<T> {
  const res = await fetch(tunnel.inspectorUrl + path);
  return (await res.json()) as T;
}

it('records an h2c exchange: request head and body, status, response head and body', async () => {
  backend.routes.set('/orders', (stream) => {
    let body = '';
    stream.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    stream.on('end', () => {
      stream.respond({ ':status': 201, 'content-type': 'application/json', 'x-backend': 'h2' });
      stream.end(JSON.stringify({ got: body }));
    });
  });
  const res = await send({
    port,
    path: '/orders',
    method: 'POST',
    headers: ['host', `h2-inspected.localhost:${port}`, 'content-type', 'text/plain', 'x-hook', 'one'],
    body: Buffer.from('two widgets'),
  });
  expect(res.status).toBe(201);
  let entries: EntrySummary[] = [];
  // The entry is stored when the exchange finishes, which may be just after the client has its answer.
  while (entries.length === 0) {
    entries = (await api<{ entries: EntrySummary[] }>('/api/entries')).entries;
  }
  const entry = await api<Entry>(`/api/entries/${entries[0]!.id}`);
  expect(entry).toMatchObject({ method: 'POST', status: 201 });
  expect(entry.requestHeaders).toContainEqual(['x-hook', 'one']);
  expect(Buffer.from(entry.requestBody.base64, 'base64').toString()).toBe('two widgets');
  expect(entry.responseHeaders).toContainEqual(['x-backend', 'h2']);
  expect(Buffer.from(entry.responseBody.base64, 'base64').toString()).toBe('{"got":"two widgets"}');
});
