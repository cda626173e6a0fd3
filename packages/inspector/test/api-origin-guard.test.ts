import { once } from 'node:events';
import { type IncomingMessage, request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createInspector, type Inspector } from '../src/inspector.js';
import { MAX_READERS } from '../src/server/event-stream.js';

const open: Inspector[] = [];
afterEach(async () => {
  for (const inspector of open.splice(0)) await inspector.close();
});

async function inspector(): Promise<Inspector> {
  const started = await createInspector({ target: { origin: 'http://127.0.0.1:9', basePath: '' }, port: 0 });
  open.push(started);
  return started;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with exactly the headers given (node:http: fetch would add or refuse some of them). */
function call(
  base: string,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      // An event stream that was let in never ends: its status and head are the answer.
      if ((res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
        res.destroy();
        return;
      }
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const errorCode = (answer: Answer): string =>
  (JSON.parse(answer.body) as { error: { code: string } }).error.code;

describe('the API refuses other origins’ pages, GET too', () => {
  for (const path of ['/api/status', '/api/entries?body=x', '/api/har', '/api/events']) {
    for (const site of ['cross-site', 'same-site']) {
      it(`GET ${path} with Sec-Fetch-Site: ${site} is a 403 FORBIDDEN_ORIGIN`, async () => {
        const { url } = await inspector();
        const answer = await call(url, path, { 'sec-fetch-site': site });
        expect(answer.status).toBe(403);
        expect(errorCode(answer)).toBe('TUNNEL2_ERR_INSPECTOR_FORBIDDEN_ORIGIN');
        expect(JSON.parse(answer.body).error.message).toContain(site);
      });
    }
  }

  it('answers the page (same-origin), a typed URL (none) and a script (no header)', async () => {
    const { url } = await inspector();
    const cases: Record<string, string>[] = [
      { 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'none' },
      {},
    ];
    for (const headers of cases) {
      expect((await call(url, '/api/status', headers)).status).toBe(200);
      expect((await call(url, '/api/events', headers)).status).toBe(200);
    }
  });

  it('refuses an Origin other than its own, compared with the Host the request was sent to', async () => {
    const started = await inspector();
    const { url } = started;
    const host = new URL(url).host;
    for (const origin of [
      'http://evil.example',
      'null',
      `https://${host}`,
      'http://localhost:1',
      'not a url',
    ]) {
      const answer = await call(url, '/api/har', { origin });
      expect(answer.status, origin).toBe(403);
      expect(errorCode(answer)).toBe('TUNNEL2_ERR_INSPECTOR_FORBIDDEN_ORIGIN');
    }
    // Another address of the inspector's own (localhost instead of 127.0.0.1) is another origin for this Host.
    const port = new URL(url).port;
    expect((await call(url, '/api/status', { origin: `http://localhost:${port}` })).status).toBe(403);
    expect((await call(url, '/api/status', { origin: url })).status).toBe(200);
    // A state change from another origin changes nothing.
    const pause = await call(
      url,
      '/api/capture',
      { origin: 'http://evil.example' },
      'POST',
      '{"paused":true}',
    );
    expect(pause.status).toBe(403);
    expect(started.store.paused).toBe(false);
    const own = await call(
      url,
      '/api/capture',
      { origin: url, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' },
      'POST',
      '{"paused":true}',
    );
    expect(own.status).toBe(200);
    expect(started.store.paused).toBe(true);
  });

  it('still serves the page itself on a navigation from another site (a link), never to be framed', async () => {
    const { url } = await inspector();
    const page = await call(url, '/', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' });
    expect(page.status).toBe(200);
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    const api = await call(url, '/api/status', {});
    expect(api.headers['x-frame-options']).toBe('DENY');
    expect(api.headers['content-security-policy']).toBe("frame-ancestors 'none'");
  });
});

/** A GET /api/events with the given headers: its answer, left open. */
function stream(base: string, headers: Record<string, string>): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/api/events`, { headers }, resolve);
    req.on('error', reject);
    req.end();
  });
}

/** Resolves with the data of the first `event: <name>` the stream carries. */
function nextEvent(res: IncomingMessage, name: string): Promise<string> {
  return new Promise((resolve) => {
    let buffer = '';
    res.setEncoding('utf8');
    res.on('data', (text: string) => {
      buffer += text;
      const match = new RegExp(`event: ${name}\ndata: (.*)\n\n`).exec(buffer);
      if (match !== null) resolve(match[1]!);
    });
  });
}

describe('live event streams', () => {
  it(`a flood of streams cannot push the page's own out: other sites' are refused, past ${MAX_READERS} all are`, async () => {
    const started = await inspector();
    const { url } = started;
    const page = await stream(url, { 'sec-fetch-site': 'same-origin' });
    expect(page.statusCode).toBe(200);
    const opened: IncomingMessage[] = [page];
    try {
      for (let i = 0; i < 2 * MAX_READERS; i++) {
        const foreign = await stream(url, { 'sec-fetch-site': 'cross-site' });
        expect(foreign.statusCode).toBe(403);
        foreign.resume();
      }
      for (let i = 1; i < MAX_READERS; i++) {
        const local = await stream(url, {});
        expect(local.statusCode).toBe(200);
        local.resume();
        opened.push(local);
      }
      const refused = await stream(url, {});
      expect(refused.statusCode).toBe(503);
      expect(refused.headers['retry-after']).toBe('1');
      refused.setEncoding('utf8');
      const [body] = (await once(refused, 'data')) as [string];
      expect(JSON.parse(body).error.code).toBe('TUNNEL2_ERR_INSPECTOR_BUSY');
      // The page's stream is still served.
      const seen = nextEvent(page, 'status');
      started.store.setPaused(true);
      expect(JSON.parse(await seen)).toEqual({ paused: true });
    } finally {
      for (const res of opened) res.destroy();
    }
  });
});
