import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { EntrySummary, InFlightSummary } from '../src/entries/entry.js';
import type { StoredEntry } from '../src/entries/stored-entry.js';
import { createInspector, type Inspector } from '../src/inspector.js';
import { toSummary } from '../src/views/entry-view.js';

interface Seen {
  req: IncomingMessage;
  res: ServerResponse;
  body: Buffer;
}

/** A local target: each request is handed to `answer` once its body arrived. */
async function startTarget(answer: (seen: Seen) => void): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => answer({ req, res, body: Buffer.concat(chunks) }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const thing of open.splice(0)) await thing.close();
});

async function inspectorFor(
  origin: string,
  options: { bodyLimit?: number; budget?: number; forwardHeaders?: (raw: string[]) => string[] } = {},
): Promise<Inspector> {
  const inspector = await createInspector({
    target: { origin, basePath: '', forwardHeaders: options.forwardHeaders },
    port: 0,
    bodyLimit: options.bodyLimit,
    budget: options.budget,
  });
  open.push(inspector);
  return inspector;
}

function post(inspector: Inspector, id: string, body?: unknown): Promise<Response> {
  return fetch(`${inspector.url}/api/entries/${id}/replay`, {
    method: 'POST',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** Records one finished POST as the agent would. */
function recordPost(inspector: Inspector, body: Buffer, headers: string[] = []): StoredEntry {
  const r = inspector.capture.begin({ method: 'POST', target: '/hook', headers })!;
  r.requestData(body);
  r.responseHead(200, []);
  return inspector.store.get(r.finish()!)!;
}

describe('inspector API', () => {
  it('before=<id> pages follow the list when exchanges finish out of order', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const started = ['/a', '/b', '/c', '/d'].map(
      (target) => inspector.capture.begin({ method: 'GET', target, headers: [] })!,
    );
    for (const i of [2, 0, 3, 1]) started[i]!.finish();
    const paths: string[] = [];
    let before = '';
    for (let page = 0; page < 4; page++) {
      const res = await fetch(`${inspector.url}/api/entries?limit=1${before}`);
      const { entries } = (await res.json()) as { entries: EntrySummary[] };
      if (entries.length === 0) break;
      paths.push(entries[0]!.path);
      before = `&before=${entries[0]!.id}`;
    }
    expect(paths).toEqual(['/b', '/d', '/a', '/c']);
  });

  it('a malformed %-escape is a 400 BAD_REQUEST, not a 502', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const res = await fetch(`${inspector.url}/api/entries/%zz`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
      'TUNNEL2_ERR_INSPECTOR_BAD_REQUEST',
    );
  });

  it('keeps the body limit within half the budget', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9', { bodyLimit: 10_000_000, budget: 1_000_000 });
    const status = (await (await fetch(`${inspector.url}/api/status`)).json()) as { bodyLimit: number };
    expect(status.bodyLimit).toBe(500_000);
  });
});

describe('replay', () => {
  it('refuses a truncated body unless the client sends one', async () => {
    const seen: Seen[] = [];
    const { server, origin } = await startTarget((s) => {
      seen.push(s);
      s.res.end('ok');
    });
    open.push(server);
    const inspector = await inspectorFor(origin, { bodyLimit: 10 });
    const entry = recordPost(inspector, Buffer.alloc(100, 'x'));
    const refused = await post(inspector, entry.id);
    expect(refused.status).toBe(400);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('TUNNEL2_ERR_INSPECTOR_BAD_REQUEST');
    expect(error.message).toContain('captured 10 of 100 bytes');
    expect(seen).toHaveLength(0);
    const whole = await post(inspector, entry.id, { bodyBase64: Buffer.alloc(100, 'y').toString('base64') });
    expect(whole.status).toBe(200);
    expect(seen[0]!.body.length).toBe(100);
  });

  it('forwards the head as the agent does: fields named in Connection out; the hook decides Host', async () => {
    const seen: Seen[] = [];
    const { server, origin } = await startTarget((s) => {
      seen.push(s);
      s.res.end('ok');
    });
    open.push(server);
    const headers = ['Host', 'public.example', 'Connection', 'x-hop', 'X-Hop', 'secret', 'X-Kept', '1'];
    const plain = await inspectorFor(origin);
    await post(plain, recordPost(plain, Buffer.from('a'), headers).id);
    expect(seen[0]!.req.headers.host).toBe(new URL(origin).host);
    expect(seen[0]!.req.headers['x-hop']).toBeUndefined();
    expect(seen[0]!.req.headers['x-kept']).toBe('1');
    // The agent's own forwarding (here: --host-header preserve) is used when given.
    const preserving = await inspectorFor(origin, { forwardHeaders: (raw) => raw.slice(0, 2) });
    await post(preserving, recordPost(preserving, Buffer.from('a'), headers).id);
    expect(seen[1]!.req.headers.host).toBe('public.example');
    expect(seen[1]!.req.headers['x-kept']).toBeUndefined();
  });

  for (const how of ['the API client goes away', 'the inspector closes'] as const) {
    it(`stops a streaming replay when ${how}`, async () => {
      let answering: (res: ServerResponse) => void = () => {};
      const answered = new Promise<ServerResponse>((r) => {
        answering = r;
      });
      const { server, origin } = await startTarget(({ res }) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: first\n\n', () => answering(res));
      });
      open.push({ close: () => server.closeAllConnections() }, server);
      const inspector = await inspectorFor(origin);
      const entry = recordPost(inspector, Buffer.from('go'));
      const client = request(`${inspector.url}/api/entries/${entry.id}/replay`, { method: 'POST' });
      client.on('error', () => {});
      client.end();
      const res = await answered;
      const stored = once(inspector.store, 'entry') as Promise<[string]>;
      if (how === 'the API client goes away') client.destroy();
      else await inspector.close();
      await once(res, 'close');
      const replayed = inspector.store.get((await stored)[0])!;
      expect(replayed.replayOf).toBe(entry.id);
      expect(replayed.error?.code).toBe('replay_cancelled');
    });
  }
});

describe('GET /api/inflight', () => {
  it('lists a running exchange with a stable key, its request headers, and the startedAt its entry will have', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const running = inspector.capture.begin({
      method: 'POST',
      target: '/hold?x=1',
      headers: ['Content-Type', 'application/json', 'X-Hook', 'a', 'X-Hook', 'b'],
    })!;
    running.requestData(Buffer.from('{"a":'));
    const list = async () =>
      ((await (await fetch(`${inspector.url}/api/inflight`)).json()) as { exchanges: InFlightSummary[] })
        .exchanges;
    const [first] = await list();
    expect(first).toMatchObject({
      method: 'POST',
      path: '/hold',
      query: 'x=1',
      status: 0,
      requestBytes: 5,
      requestHeaders: [
        ['Content-Type', 'application/json'],
        ['X-Hook', 'a'],
        ['X-Hook', 'b'],
      ],
    });
    expect(first!.key).toMatch(/^\S+$/);
    // The same exchange keeps its key from one answer to the next; another gets another.
    const other = inspector.capture.begin({ method: 'GET', target: '/sse', headers: [] })!;
    const both = await list();
    expect(both.map((e) => e.path)).toEqual(['/sse', '/hold']);
    expect(both[1]!.key).toBe(first!.key);
    expect(both[0]!.key).not.toBe(first!.key);
    running.responseHead(200, []);
    const id = running.finish()!;
    other.finish();
    const entry = (await (await fetch(`${inspector.url}/api/entries/${id}`)).json()) as EntrySummary;
    // The entry names the row it replaces; its start is the one listed.
    expect(entry.flightKey).toBe(first!.key);
    expect(entry.startedAt).toBe(first!.startedAt);
    expect(await list()).toEqual([]);
    // The next exchanges run in the slots those two ran in: they are new exchanges, with new keys.
    inspector.capture.begin({ method: 'GET', target: '/next', headers: [] });
    inspector.capture.begin({ method: 'GET', target: '/after', headers: [] });
    const reused = await list();
    expect(reused.map((e) => e.path)).toEqual(['/after', '/next']);
    for (const exchange of reused) expect([first!.key, both[0]!.key]).not.toContain(exchange.key);
  });

  it('keys each exchange by its slot sequence: two alike begun in one tick stay apart, and the entry carries the key', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const entries: EntrySummary[] = [];
    inspector.store.on('entry', (id) => entries.push(toSummary(inspector.store.get(id)!)));
    // As two requests decoded from one mux message: same tick, same method and path, same millisecond.
    const start = { method: 'POST', target: '/hook', headers: [] };
    const a = inspector.capture.begin(start)!;
    const b = inspector.capture.begin(start)!;
    const list = async () =>
      (await (await fetch(`${inspector.url}/api/inflight`)).json()) as {
        exchanges: InFlightSummary[];
        total: number;
      };
    const before = await list();
    expect(before.total).toBe(2);
    const [keyB, keyA] = before.exchanges.map((e) => e.key);
    expect(keyA).not.toBe(keyB);
    a.responseHead(200, []);
    const id = a.finish()!;
    const after = await list();
    expect(after).toEqual({ exchanges: [expect.objectContaining({ key: keyB, path: '/hook' })], total: 1 });
    expect(entries.map((e) => e.flightKey)).toEqual([keyA]);
    const stored = (await (await fetch(`${inspector.url}/api/entries/${id}`)).json()) as EntrySummary;
    expect(stored.flightKey).toBe(keyA);
    const listed = (await (await fetch(`${inspector.url}/api/entries`)).json()) as {
      entries: EntrySummary[];
    };
    expect(listed.entries.map((e) => e.flightKey)).toEqual([keyA]);
    b.finish();
    expect(entries.map((e) => e.flightKey)).toEqual([keyA, keyB]);
  });

  it('counts every exchange running; ?limit= caps only what is listed (default 100, at most 1000)', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const running = Array.from(
      { length: 4_200 },
      (_, i) => inspector.capture.begin({ method: 'GET', target: `/${i}`, headers: [] })!,
    );
    const get = async (query: string) => {
      const res = await fetch(`${inspector.url}/api/inflight${query}`);
      return {
        status: res.status,
        body: (await res.json()) as { exchanges: InFlightSummary[]; total: number },
      };
    };
    const first = await get('');
    expect(first.body.total).toBe(4_200);
    expect(first.body.exchanges.map((e) => e.path)).toEqual(
      Array.from({ length: 100 }, (_, i) => `/${4_199 - i}`),
    );
    expect((await get('?limit=1000')).body.exchanges).toHaveLength(1000);
    expect((await get('?limit=3')).body.exchanges.map((e) => e.path)).toEqual(['/4199', '/4198', '/4197']);
    for (const bad of ['0', '1001', 'x', '2.5']) expect((await get(`?limit=${bad}`)).status).toBe(400);
    const status = (await (await fetch(`${inspector.url}/api/status`)).json()) as { inFlight: number };
    expect(status.inFlight).toBe(4_200);
    // The oldest, opened past the old cap of 4,096, leave the list when they end like the others.
    for (const r of running) r.finish();
    expect(inspector.store.inFlightCount).toBe(0);
    expect(await get('')).toEqual({ status: 200, body: { exchanges: [], total: 0 } });
  });
});
