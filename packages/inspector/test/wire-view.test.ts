import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../src/entries/entry.js';
import { createInspector, type Inspector } from '../src/inspector.js';
import {
  AGENT_ANSWER_HOP,
  type RawExchange,
  REPLAY_REQUEST_HOP,
  REPLAY_RESPONSE_HOP,
  REQUEST_HOP,
  RESPONSE_HOP,
} from '../src/views/wire-view.js';

const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const thing of open.splice(0)) await thing.close();
});

/** A local target that answers every request 200 with its own reason phrase. */
async function startTarget(): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, 'Replayed Fine', { 'content-type': 'text/plain' });
      res.end('again');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  open.push({ close: () => new Promise((r) => server.close(r)) });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function inspectorFor(origin: string, bodyLimit?: number): Promise<Inspector> {
  const inspector = await createInspector({ target: { origin, basePath: '' }, port: 0, bodyLimit });
  open.push(inspector);
  return inspector;
}

async function rawOf(inspector: Inspector, id: string): Promise<RawExchange> {
  const res = await fetch(`${inspector.url}/api/entries/${id}/raw`);
  expect(res.status).toBe(200);
  return (await res.json()) as RawExchange;
}

async function entryOf(inspector: Inspector, id: string): Promise<Entry> {
  return (await (await fetch(`${inspector.url}/api/entries/${id}`)).json()) as Entry;
}

describe('GET /api/entries/:id/raw', () => {
  it('writes each head as HTTP/1.1 lines in the order and case kept, and each text body after the empty line', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const r = inspector.capture.begin({
      method: 'PATCH',
      target: '/items/7?x=%20y',
      headers: ['Host', 'a.example', 'X-B', '2', 'x-a', '1', 'X-B', 'again'],
    })!;
    r.requestData(Buffer.from('{"n":1}'));
    r.responseHead(204, ['X-Done', 'yes']);
    const raw = await rawOf(inspector, r.finish()!);
    expect(raw.request).toEqual({
      hop: REQUEST_HOP,
      head: 'PATCH /items/7?x=%20y HTTP/1.1\r\nHost: a.example\r\nX-B: 2\r\nx-a: 1\r\nX-B: again\r\n\r\n',
      body: '{"n":1}',
      bodyNote: null,
    });
    // A head given as a list carries no reason phrase: the status line has none.
    expect(raw.response).toEqual({
      hop: RESPONSE_HOP,
      head: 'HTTP/1.1 204\r\nX-Done: yes\r\n\r\n',
      body: null,
      bodyNote: null,
    });
  });

  it('says a gzip body is binary and encoded, and where a body was cut, instead of showing it', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9', 16);
    const r = inspector.capture.begin({ method: 'POST', target: '/', headers: ['Host', 'a'] })!;
    r.requestData(Buffer.from('a text body longer than sixteen bytes'));
    r.responseHead(200, ['Content-Encoding', 'gzip']);
    r.responseData(gzipSync('zipped').subarray(0, 16));
    const raw = await rawOf(inspector, r.finish()!);
    expect(raw.request.body).toBe('a text body long');
    expect(raw.request.bodyNote).toBe('captured 16 of 37 bytes (the body limit): the rest was not kept');
    expect(raw.response!.body).toBeNull();
    expect(raw.response!.bodyNote).toMatch(/^16 bytes of binary \(gzip-encoded\) body, not shown as text/);
  });

  it("has no response when no head came, and names the agent's own answer for a backend that gave none", async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const none = inspector.capture.begin({ method: 'GET', target: '/gone', headers: [] })!;
    expect(
      (await rawOf(inspector, none.finish({ code: 'client_went_away', message: 'gone' })!)).response,
    ).toBeNull();
    const refused = inspector.capture.begin({ method: 'GET', target: '/down', headers: [] })!;
    refused.responseHead(502, ['X-Tunnel2-Error', 'TUNNEL2_ERR_BACKEND_UNREACHABLE']);
    expect((await rawOf(inspector, refused.finish()!)).response!.hop).toBe(AGENT_ANSWER_HOP);
  });

  it('labels a replay as sent from the inspector to the backend, and shows the one Host it had', async () => {
    const origin = await startTarget();
    const inspector = await inspectorFor(origin);
    const r = inspector.capture.begin({
      method: 'GET',
      target: '/again',
      headers: ['Host', 'public.example'],
    })!;
    r.responseHead(200, []);
    const original = r.finish()!;
    const replayed = (await (
      await fetch(`${inspector.url}/api/entries/${original}/replay`, { method: 'POST' })
    ).json()) as { entry: { id: string } };
    const raw = await rawOf(inspector, replayed.entry.id);
    expect(raw.request.hop).toBe(REPLAY_REQUEST_HOP);
    expect(raw.request.head).toContain(`\r\nHost: ${new URL(origin).host}\r\n`);
    expect(raw.response!.hop).toBe(REPLAY_RESPONSE_HOP);
    expect(raw.response!.head.startsWith('HTTP/1.1 200 Replayed Fine\r\n')).toBe(true);
    expect(raw.response!.body).toBe('again');
    expect((await entryOf(inspector, replayed.entry.id)).hosts).toEqual({
      public: null,
      backend: new URL(origin).host,
    });
    // The original: the public Host, and the target's (the default forwarding rewrites it).
    expect((await entryOf(inspector, original)).hosts).toEqual({
      public: 'public.example',
      backend: new URL(origin).host,
    });
  });

  it('shows control characters of hostile head fields as visible symbols: no forged line, no terminal escape', async () => {
    // The heads come from the edge and the backend: a CR/LF inside a field would otherwise print as a header
    // line the peer never sent, and an ESC would reach whoever copies the text into a terminal.
    const inspector = await inspectorFor('http://127.0.0.1:9');
    const r = inspector.capture.begin({
      method: 'GET',
      target: '/a\r\nX-Forged-Target: 1',
      headers: ['Host', 'a.example', 'X-Evil\x1b[31m', 'v\r\nX-Forged: 1\x00\x7f', 'X-Tab', 'a\tb'],
    })!;
    r.responseHead(200, ['Set-Cookie', 'a=1\nX-Forged-Response: 2'], undefined, 'OK\r\nX-Forged-Reason: 3');
    const raw = await rawOf(inspector, r.finish()!);
    const requestLines = raw.request.head.split('\r\n');
    expect(requestLines).toEqual([
      'GET /a\u240d\u240aX-Forged-Target: 1 HTTP/1.1',
      'Host: a.example',
      'X-Evil\u241b[31m: v\u240d\u240aX-Forged: 1\u2400\u2421',
      // A tab is part of a field value's grammar: kept.
      'X-Tab: a\tb',
      '',
      '',
    ]);
    expect(raw.response?.head.split('\r\n')).toEqual([
      'HTTP/1.1 200 OK\u240d\u240aX-Forged-Reason: 3',
      'Set-Cookie: a=1\u240aX-Forged-Response: 2',
      '',
      '',
    ]);
  });

  it('answers 404 for an entry it does not have, and 405 for anything but GET', async () => {
    const inspector = await inspectorFor('http://127.0.0.1:9');
    expect((await fetch(`${inspector.url}/api/entries/42/raw`)).status).toBe(404);
    const r = inspector.capture.begin({ method: 'GET', target: '/', headers: [] })!;
    const id = r.finish()!;
    expect((await fetch(`${inspector.url}/api/entries/${id}/raw`, { method: 'DELETE' })).status).toBe(405);
  });
});
