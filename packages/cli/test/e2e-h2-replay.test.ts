import { createServer, type IncomingMessage } from 'node:http';
import { credentials } from '@grpc/grpc-js';
import { buildEdge } from '@tunnel2/edge';
import type { Entry, EntrySummary } from '@tunnel2/inspector';
import { type GrpcTestServer, startGrpcTestServer, TestServiceClient } from '@tunnel2/test-backend/grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { startH2Backend } from './support/h2-backend.js';
import { send } from './support/http-client.js';
import { startInspectedStack } from './support/inspected-stack.js';
import { silent } from './support/stack.js';

// The inspector's replay goes to the target the way the original request went: over HTTP/2, on the agent's
// own sessions, when the tunnel's target speaks HTTP/2 (an h2c-only gRPC server cannot answer HTTP/1.1), with
// the response's trailers kept in the entry; over HTTP/1.1 as before otherwise.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function api<T>(base: string, path: string, init?: RequestInit): Promise<T> {
  const res = await fetch(base + path, init);
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

/** The only entry of the store, once its exchange has finished (it is stored just after the client's answer). */
async function onlyEntry(base: string): Promise<Entry> {
  let entries: EntrySummary[] = [];
  while (entries.length === 0)
    entries = (await api<{ entries: EntrySummary[] }>(base, '/api/entries')).entries;
  return api<Entry>(base, `/api/entries/${entries[0]!.id}`);
}

async function tunnelTo(target: number, subdomain: string): Promise<{ tunnel: Tunnel; port: number }> {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const tunnel = await connect({ target, server: url, subdomain, h2c: true, inspect: { port: 0 } });
  cleanups.push(() => tunnel.close(0));
  return { tunnel, port };
}

describe('a replay to an --h2c target', () => {
  it('a captured gRPC unary call replayed through the API: the backend sees a second call, the entry grpc-status 0', async () => {
    const server: GrpcTestServer = await startGrpcTestServer();
    cleanups.push(() => server.close());
    const { tunnel, port } = await tunnelTo(server.port, 'grpc-replay');
    const client = new TestServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), {
      'grpc.default_authority': `grpc-replay.localhost:${port}`,
    });
    cleanups.push(() => client.client.close());
    let calls = 0;
    server.events.on('call', (method) => {
      if (method === 'Echo') calls++;
    });
    const { error } = await client.unary('Echo', { message: 'again' }).outcome;
    expect(error).toBeUndefined();
    const base = tunnel.inspectorUrl!;
    const original = await onlyEntry(base);
    // The original's trailers are kept too: a gRPC call's status is in them.
    expect(original.responseTrailers).toContainEqual(['grpc-status', '0']);

    const { entry } = await api<{ entry: EntrySummary }>(base, `/api/entries/${original.id}/replay`, {
      method: 'POST',
    });
    expect(entry).toMatchObject({ replayOf: original.id, status: 200, method: 'POST' });
    expect(entry.error).toBeUndefined();
    expect(calls).toBe(2);
    const replayed = await api<Entry>(base, `/api/entries/${entry.id}`);
    expect(replayed.responseHeaders).toContainEqual(['content-type', 'application/grpc+proto']);
    expect(replayed.responseTrailers).toContainEqual(['grpc-status', '0']);
    // The same EchoReply, gRPC-framed, as the original call got.
    expect(replayed.responseBody.base64).toBe(original.responseBody.base64);
  });

  it('a plain request is replayed over HTTP/2 too: an h2c-only backend answers it', async () => {
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    backend.routes.set('/hello', (stream, headers) => {
      stream.respond({ ':status': 200 });
      stream.end(`hello over ${headers[':scheme']} for ${headers[':authority']}`);
    });
    const { tunnel, port } = await tunnelTo(backend.port, 'h2-replay');
    const res = await send({ port, path: '/hello', headers: ['host', `h2-replay.localhost:${port}`] });
    expect(res.status).toBe(200);
    const base = tunnel.inspectorUrl!;
    const original = await onlyEntry(base);
    const { entry } = await api<{ entry: EntrySummary }>(base, `/api/entries/${original.id}/replay`, {
      method: 'POST',
    });
    expect(entry).toMatchObject({ replayOf: original.id, status: 200 });
    expect(entry.error).toBeUndefined();
    const replayed = await api<Entry>(base, `/api/entries/${entry.id}`);
    expect(Buffer.from(replayed.responseBody.base64, 'base64').toString()).toBe(
      `hello over http for localhost:${backend.port}`,
    );
    expect(backend.seen.length).toBe(2);
  });

  it('a backend that is down: the replay is an entry with the failure, as over HTTP/1.1', async () => {
    const server: GrpcTestServer = await startGrpcTestServer();
    const { tunnel, port } = await tunnelTo(server.port, 'grpc-gone');
    const client = new TestServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), {
      'grpc.default_authority': `grpc-gone.localhost:${port}`,
    });
    cleanups.push(() => client.client.close());
    expect((await client.unary('Echo', { message: 'once' }).outcome).error).toBeUndefined();
    const base = tunnel.inspectorUrl!;
    const original = await onlyEntry(base);
    await server.close();
    const { entry } = await api<{ entry: EntrySummary }>(base, `/api/entries/${original.id}/replay`, {
      method: 'POST',
    });
    expect(entry.replayOf).toBe(original.id);
    // Refused at the dial; or, if the agent had not yet read the old session's close, failed on it.
    expect(['replay_failed', 'response_aborted']).toContain(entry.error?.code);
  });
});

describe('a replay to an HTTP/1.1 target', () => {
  it('goes over HTTP/1.1, as before', async () => {
    const versions: string[] = [];
    const backend = createServer((req: IncomingMessage, res) => {
      versions.push(req.httpVersion);
      res.end('h1');
    });
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    const stack = await startInspectedStack(backend, 'h1-replay');
    cleanups.push(() => stack.close());
    const res = await send({
      port: stack.port,
      path: '/one',
      headers: ['host', `h1-replay.localhost:${stack.port}`],
    });
    expect(res.status).toBe(200);
    const original = await onlyEntry(stack.inspectorUrl);
    const { entry } = await api<{ entry: EntrySummary }>(
      stack.inspectorUrl,
      `/api/entries/${original.id}/replay`,
      { method: 'POST' },
    );
    expect(entry).toMatchObject({ replayOf: original.id, status: 200 });
    expect(versions).toEqual(['1.1', '1.1']);
  });
});
