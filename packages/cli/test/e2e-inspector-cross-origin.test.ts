import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInspector, type Inspector } from '@tunnel2/inspector';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from './support/stack.js';

const CHROMIUM = '/usr/bin/chromium';

/**
 * Another local app's page (a developer's own dev server, or a site the browser was sent to): it tries to
 * use the inspector on the same host behind the user's back. `same-site` for Chromium (ports do not count).
 */
function hostilePage(inspectorUrl: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>other app</title></head><body>
<iframe id="framed" src="${inspectorUrl}/"></iframe>
<script>
for (let i = 0; i < 4; i++) fetch('${inspectorUrl}/api/har', { mode: 'no-cors' }).catch(() => {});
fetch('${inspectorUrl}/api/entries?body=x&limit=1000', { mode: 'no-cors' }).catch(() => {});
for (let i = 0; i < 20; i++) new EventSource('${inspectorUrl}/api/events');
</script></body></html>`;
}

describe('the inspector against another origin’s page in headless Chromium', () => {
  let browser: Browser;
  let inspector: Inspector;
  let other: Server;
  let otherUrl: string;

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    inspector = await createInspector({ target: { origin: 'http://127.0.0.1:9', basePath: '' }, port: 0 });
    other = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(hostilePage(inspector.url));
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}/`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await inspector?.close();
    other?.closeAllConnections();
    await new Promise((resolve) => other?.close(resolve));
  });

  it('refuses its API calls (403), cannot be framed, and the real page keeps its live stream', async () => {
    // The user's own inspector tab first.
    const mine = await browser.newPage();
    await mine.goto(inspector.url);
    await mine.locator('#har-all').waitFor();

    const page = await browser.newPage();
    interface Settled {
      path: string;
      site: string | undefined;
      status: number | undefined;
      failure: string | undefined;
    }
    const settled: Settled[] = [];
    const all = new Promise<void>((resolve) => {
      const note = async (request: import('playwright-core').Request, failure?: string): Promise<void> => {
        if (!request.url().startsWith(inspector.url)) return;
        const headers = await request.allHeaders();
        const response = await request.response().catch(() => null);
        settled.push({
          path: new URL(request.url()).pathname,
          site: headers['sec-fetch-site'],
          status: response?.status(),
          failure,
        });
        // 4 HAR exports, a body search, 20 event streams and the frame.
        if (settled.length === 26) resolve();
      };
      page.on('requestfinished', (request) => void note(request));
      page.on('requestfailed', (request) => void note(request, request.failure()?.errorText));
    });
    await page.goto(otherUrl);
    await all;
    // The inspector refuses them before any work: the no-cors requests show their 403; the event streams'
    // 403 fails their CORS check (no stream, and EventSource does not retry).
    const byPath = (path: string) => settled.filter((s) => s.path === path);
    expect(byPath('/api/har').map((s) => s.status)).toEqual([403, 403, 403, 403]);
    expect(byPath('/api/entries').map((s) => s.status)).toEqual([403]);
    expect(byPath('/api/events')).toHaveLength(20);
    for (const stream of byPath('/api/events')) expect(stream.failure).toBe('net::ERR_FAILED');
    // The frame is blocked by the page's own answer (X-Frame-Options, frame-ancestors). Chromium calls
    // another port of the same host same-site: what the API refuses along with cross-site.
    expect(byPath('/')).toEqual([
      expect.objectContaining({ site: 'same-site', failure: 'net::ERR_BLOCKED_BY_RESPONSE' }),
    ]);
    const framed = page.frames().find((f) => f !== page.mainFrame());
    expect(await framed!.locator('#har-all').count()).toBe(0);

    // The real page still gets live events: pausing from the API shows in it at once.
    await fetch(`${inspector.url}/api/capture`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"paused":true}',
    });
    await mine.locator('#pause', { hasText: /resume/i }).waitFor();
    await page.close();
    await mine.close();
  });

  it('a page whose stream was refused (16 open already) opens it again once there is room', async () => {
    await fetch(`${inspector.url}/api/capture`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"paused":false}',
    });
    // The pages of the test before closed their streams; the inspector hears of it when their connections'
    // close arrives (a 17th stream was refused while one still counted). No stream open: the store's entry
    // events have no listener (the inspector drops it at zero readers).
    await until(() => inspector.store.listenerCount('entry') === 0, {
      what: 'the previous pages’ event streams to close',
      timeoutMs: 10_000,
    });
    // 16 streams held by local scripts: the page's is refused with 503, which ends an EventSource for good.
    const held: IncomingMessage[] = [];
    for (let i = 0; i < 16; i++) {
      held.push(
        await new Promise<IncomingMessage>((resolve, reject) => {
          request(`${inspector.url}/api/events`, resolve).on('error', reject).end();
        }),
      );
    }
    expect(held.map((res) => res.statusCode)).toEqual(Array(16).fill(200));
    const page = await browser.newPage();
    const refused = page.waitForEvent('requestfailed', (r) => r.url().endsWith('/api/events'));
    await page.goto(inspector.url);
    await refused;
    // Room again: the page opens its stream by itself, and live events reach it.
    const reopened = page.waitForResponse((r) => r.url().endsWith('/api/events') && r.status() === 200);
    held.pop()!.destroy();
    await reopened;
    await fetch(`${inspector.url}/api/capture`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"paused":true}',
    });
    await page.locator('#pause', { hasText: /resume/i }).waitFor();
    for (const res of held) res.destroy();
    await page.close();
  });
});
