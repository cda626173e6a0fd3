import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import { gzipSync } from 'node:zlib';
import { buildEdge } from '@tunnel2/edge';
import type { Entry, EntrySummary } from '@tunnel2/inspector';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { type InspectedStack, startInspectedStack } from './support/inspected-stack.js';
import { silent } from './support/stack.js';
import { startWsBackend } from './support/ws-backend.js';

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
}

/** A backend that records what reaches it and answers with a gzipped JSON body. */
function recordingBackend(seen: Seen[]): Promise<Server> {
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body });
      const answer = gzipSync(JSON.stringify({ echoed: body, marker: 'needle-in-response' }));
      res.writeHead(201, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'set-cookie': 'a=b',
      });
      res.end(answer);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** One JSON call to the inspector's API. */
async function api<T>(
  base: string,
  path: string,
  init: { method?: string; body?: unknown } = {},
): Promise<{ status: number; json: T }> {
  const res = await fetch(base + path, {
    method: init.method ?? 'GET',
    ...(init.body === undefined
      ? {}
      : { body: JSON.stringify(init.body), headers: { 'content-type': 'application/json' } }),
  });
  return { status: res.status, json: (await res.json()) as T };
}

/** Reads the SSE stream until `count` events of `name` arrived (bounded by the test timeout). */
function sseEvents(
  url: string,
  name: string,
  count: number,
): { ready: Promise<void>; events: Promise<unknown[]>; close(): void } {
  let close = (): void => {};
  let onReady = (): void => {};
  const ready = new Promise<void>((r) => {
    onReady = r;
  });
  const events = new Promise<unknown[]>((resolve, reject) => {
    const req = request(url, (res) => {
      let buffer = '';
      const got: unknown[] = [];
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        buffer += text;
        if (buffer.includes(': connected')) onReady();
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event === name && data !== undefined) got.push(JSON.parse(data));
          if (got.length >= count) {
            resolve(got);
            req.destroy();
            return;
          }
          end = buffer.indexOf('\n\n');
        }
      });
    });
    req.on('error', reject);
    req.end();
    close = () => req.destroy();
  });
  return { ready, events, close };
}

describe('inspector end to end (real edge, agent with the inspector on, real backend)', () => {
  const seen: Seen[] = [];
  let stack: InspectedStack;
  let tunnel: Tunnel;
  let port: number;
  let host: string;
  let base: string;

  beforeAll(async () => {
    stack = await startInspectedStack(await recordingBackend(seen), 'inspected');
    ({ tunnel, port, inspectorUrl: base } = stack);
    host = `inspected.localhost:${port}`;
  });

  afterAll(() => stack.close());

  beforeEach(async () => {
    await api(base, '/api/entries', { method: 'DELETE' });
    await api(base, '/api/capture', { method: 'POST', body: { paused: false } });
    seen.length = 0;
  });

  const post = (path: string, body: string) =>
    send({
      port,
      path,
      method: 'POST',
      headers: [
        'Host',
        host,
        'Content-Type',
        'application/json',
        'X-Hook',
        'one',
        'X-Hook',
        'two',
        'Authorization',
        'Bearer s3cret',
      ],
      body: Buffer.from(body),
    });

  it('shows a request through the tunnel in the list, in full, and live over SSE', async () => {
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const sse = sseEvents(`${base}/api/events`, 'entry', 1);
    await sse.ready;
    const res = await post('/hooks/stripe?attempt=1', '{"type":"invoice.paid"}');
    expect(res.status).toBe(201);
    const [live] = (await sse.events) as EntrySummary[];
    expect(live).toMatchObject({
      method: 'POST',
      path: '/hooks/stripe',
      query: 'attempt=1',
      status: 201,
      kind: 'http',
    });

    const { json: status } = await api<{ count: number; publicUrl: string; paused: boolean }>(
      base,
      '/api/status',
    );
    expect(status).toMatchObject({ count: 1, paused: false, publicUrl: tunnel.url });

    const { json: list } = await api<{ entries: EntrySummary[] }>(base, '/api/entries');
    expect(list.entries.map((e) => e.id)).toEqual([live!.id]);
    expect(list.entries[0]!.clientAddress).toBe('127.0.0.1');
    expect(list.entries[0]!.ttfbMs).toBeGreaterThanOrEqual(0);

    const { json: entry } = await api<Entry>(base, `/api/entries/${live!.id}`);
    const names = entry.requestHeaders.map(([n]) => n.toLowerCase());
    expect(names).toEqual(
      expect.arrayContaining(['content-type', 'x-hook', 'authorization', 'x-forwarded-for']),
    );
    expect(entry.requestHeaders.filter(([n]) => n.toLowerCase() === 'x-hook').map(([, v]) => v)).toEqual([
      'one',
      'two',
    ]);
    expect(Buffer.from(entry.requestBody.base64, 'base64').toString()).toBe('{"type":"invoice.paid"}');
    expect(entry.responseBody.encoding).toBe('gzip');
    expect(Buffer.from(entry.responseBody.decodedBase64!, 'base64').toString()).toContain(
      'needle-in-response',
    );

    // Body search reaches into the gzipped response.
    const { json: found } = await api<{ entries: EntrySummary[] }>(base, '/api/entries?body=NEEDLE-IN');
    expect(found.entries).toHaveLength(1);
    const { json: none } = await api<{ entries: EntrySummary[] }>(base, '/api/entries?body=absent-text');
    expect(none.entries).toHaveLength(0);
    const { json: byHeader } = await api<{ entries: EntrySummary[] }>(
      base,
      '/api/entries?header=x-hook:TWO&status=2xx',
    );
    expect(byHeader.entries).toHaveLength(1);
  });

  it('replays to the backend directly, and edit-and-replay changes method, path, header and body', async () => {
    await post('/hooks/github', 'original');
    expect(seen).toHaveLength(1);
    const { json: list } = await api<{ entries: EntrySummary[] }>(base, '/api/entries');
    const id = list.entries[0]!.id;

    const { status, json: replayed } = await api<{ entry: EntrySummary }>(base, `/api/entries/${id}/replay`, {
      method: 'POST',
    });
    expect(status).toBe(200);
    expect(replayed.entry).toMatchObject({
      replayOf: id,
      method: 'POST',
      path: '/hooks/github',
      status: 201,
    });
    expect(seen).toHaveLength(2);
    expect(seen[1]).toMatchObject({ method: 'POST', url: '/hooks/github', body: 'original' });

    const { json: edited } = await api<{ entry: EntrySummary }>(base, `/api/entries/${id}/replay`, {
      method: 'POST',
      body: {
        method: 'PUT',
        path: '/hooks/edited?x=2',
        headers: [
          ['X-Edited', 'yes'],
          ['Content-Type', 'text/plain'],
        ],
        bodyBase64: Buffer.from('changed body').toString('base64'),
      },
    });
    expect(edited.entry).toMatchObject({ replayOf: id, method: 'PUT', path: '/hooks/edited', query: 'x=2' });
    expect(seen[2]).toMatchObject({ method: 'PUT', url: '/hooks/edited?x=2', body: 'changed body' });
    expect(seen[2]!.rawHeaders).toEqual(expect.arrayContaining(['X-Edited', 'yes']));
    expect(seen[2]!.rawHeaders).not.toContain('X-Hook');

    const { json: after } = await api<{ entries: EntrySummary[] }>(base, '/api/entries');
    expect(after.entries.map((e) => e.replayOf)).toEqual([id, id, undefined]);
  });

  it('pauses (nothing captured), resumes, clears; unknown entries are a 404 with a code', async () => {
    await api(base, '/api/capture', { method: 'POST', body: { paused: true } });
    await post('/while-paused', 'x');
    expect(seen).toHaveLength(1);
    let { json: list } = await api<{ entries: EntrySummary[] }>(base, '/api/entries');
    expect(list.entries).toHaveLength(0);
    await api(base, '/api/capture', { method: 'POST', body: { paused: false } });
    await post('/after', 'y');
    ({ json: list } = await api<{ entries: EntrySummary[] }>(base, '/api/entries'));
    expect(list.entries.map((e) => e.path)).toEqual(['/after']);
    const clear = sseEvents(`${base}/api/events`, 'clear', 1);
    await clear.ready;
    await api(base, '/api/entries', { method: 'DELETE' });
    await clear.events;
    ({ json: list } = await api<{ entries: EntrySummary[] }>(base, '/api/entries'));
    expect(list.entries).toHaveLength(0);
    const missing = await api<{ error: { code: string } }>(base, '/api/entries/999999');
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe('TUNNEL2_ERR_INSPECTOR_ENTRY_NOT_FOUND');
  });

  it('exports HAR with redaction and answers only to its own Host (DNS-rebinding guard)', async () => {
    await post('/hooks/har', 'body');
    const { json: har } = await api<{
      log: { entries: { request: { headers: { name: string; value: string }[] } }[] };
    }>(base, '/api/har?redact=1');
    const auth = har.log.entries[0]!.request.headers.find((h) => h.name.toLowerCase() === 'authorization');
    expect(auth?.value).toBe('[redacted]');
    const { port: inspectorPort } = new URL(base);
    const rebound = await send({
      port: Number(inspectorPort),
      path: '/api/status',
      headers: ['Host', `evil.example:${inspectorPort}`],
    });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body.toString()).error.code).toBe('TUNNEL2_ERR_INSPECTOR_FORBIDDEN_HOST');
    const local = await send({
      port: Number(inspectorPort),
      path: '/api/status',
      headers: ['Host', `localhost:${inspectorPort}`],
    });
    expect(local.status).toBe(200);
    expect(local.headers['cache-control']).toBe('no-store');
    const page = await send({
      port: Number(inspectorPort),
      path: '/',
      headers: ['Host', `localhost:${inspectorPort}`],
    });
    expect(page.status).toBe(200);
    expect(page.body.toString()).toContain('tunnel2 inspector');
  });
});

describe('inspector: a replay reaches the target with the head the agent would send', () => {
  it('keeps the public Host under --host-header preserve, as the original request had it', async () => {
    const seen: Seen[] = [];
    const stack = await startInspectedStack(await recordingBackend(seen), 'preserved', {
      hostHeader: 'preserve',
    });
    try {
      const publicHost = `preserved.localhost:${stack.port}`;
      await send({
        port: stack.port,
        path: '/hook',
        method: 'POST',
        headers: ['Host', publicHost],
        body: Buffer.from('x'),
      });
      const { json: list } = await api<{ entries: EntrySummary[] }>(stack.inspectorUrl, '/api/entries');
      await api(stack.inspectorUrl, `/api/entries/${list.entries[0]!.id}/replay`, { method: 'POST' });
      const hostOf = (s: Seen): string | undefined =>
        s.rawHeaders[s.rawHeaders.findIndex((n) => n.toLowerCase() === 'host') + 1];
      expect(seen.map(hostOf)).toEqual([publicHost, publicHost]);
    } finally {
      await stack.close();
    }
  });
});

describe('inspector: a WebSocket upgrade is one entry with its bytes and messages each way', () => {
  it('records kind websocket, status 101, duration, bytes and messages in and out', async () => {
    const backend = await startWsBackend();
    const edge = buildEdge({ port: 0, logger: silent });
    const { port } = await edge.listen();
    const tunnel = await connect({
      target: backend.port,
      server: edge.url,
      subdomain: 'wsi',
      inspect: { port: 0 },
    });
    try {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, {
        headers: { host: `wsi.localhost:${port}` },
        perMessageDeflate: false,
      });
      await once(ws, 'open');
      const echoes = new Promise<void>((resolve) => {
        let seen = 0;
        ws.on('message', () => {
          if (++seen === 3) resolve();
        });
      });
      const pong = once(ws, 'pong');
      // Three messages: a text, one sent in two fragments (one message), one with a 64-bit length; and a
      // ping, which is no message. The backend echoes each message as one.
      ws.send('hello through the tunnel');
      ws.send('frag', { fin: false });
      ws.send('mented', { fin: true });
      ws.ping();
      ws.send(Buffer.alloc(70_000, 1));
      await Promise.all([echoes, pong]);
      const sse = sseEvents(`${tunnel.inspectorUrl}/api/events`, 'entry', 1);
      await sse.ready;
      ws.close();
      const [entry] = (await sse.events) as EntrySummary[];
      expect(entry).toMatchObject({ kind: 'websocket', status: 101, path: '/echo' });
      expect(entry!.ws!.bytesIn).toBeGreaterThan(70_000);
      expect(entry!.ws!.bytesOut).toBeGreaterThan(70_000);
      expect(entry!.ws).toMatchObject({ messagesIn: 3, messagesOut: 3 });
      expect(entry!.durationMs).toBeGreaterThan(0);
    } finally {
      await tunnel.close(0);
      await edge.close(0);
      await backend.close();
    }
  });
});
