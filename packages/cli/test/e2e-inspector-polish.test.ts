import { existsSync, mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type InspectedStack, startInspectedStack } from './support/inspected-stack.js';

const CHROMIUM = '/usr/bin/chromium';
/** A header name longer than its column at 800 px: it must wrap, and only where its words meet. */
const LONG_NAME = 'X-Upstream-Correlation-Identifier-Forwarded-Through-Proxy-Chain';
const shots = mkdtempSync(join(tmpdir(), 'tunnel2-inspector-polish-'));

function backend(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, 'Fine Thanks', { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, host: req.headers.host }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The scripts below run in the page (strings: the test's own compilation has no DOM types).

/**
 * Where the text of the detail's header-name cell `name` breaks into lines: the number of lines and the
 * character just before each break, measured from the laid-out box of each character.
 */
function lineBreaksOf(name: string): string {
  return `(() => {
    const cell = [...document.querySelectorAll('#detail .pairs th')].find((th) => th.textContent === ${JSON.stringify(name)});
    const text = cell.firstChild;
    const range = document.createRange();
    const before = [];
    let lines = 1;
    let top;
    for (let i = 0; i < text.length; i++) {
      range.setStart(text, i);
      range.setEnd(text, i + 1);
      const rect = range.getClientRects()[0];
      if (rect === undefined) continue;
      if (top !== undefined && rect.top > top + 1) {
        lines++;
        before.push(text.data[i - 1]);
      }
      top = rect.top;
    }
    return { lines, before };
  })()`;
}

/** The page's and the detail's scrolling widths, the list's column widths and the column names cut short. */
const GEOMETRY = `(() => {
  const heads = [...document.querySelectorAll('#list thead th')];
  const detail = document.getElementById('detail');
  return {
    page: { scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth },
    detail: { scroll: detail.scrollWidth, client: detail.clientWidth },
    widths: heads.map((th) => th.getBoundingClientRect().width),
    clipped: heads.filter((th) => th.scrollWidth > th.clientWidth).map((th) => th.textContent),
  };
})()`;

interface Geometry {
  page: { scroll: number; client: number };
  detail: { scroll: number; client: number };
  widths: number[];
  clipped: string[];
}

const NO_SIDEWAYS_SCROLL = 'document.documentElement.scrollWidth <= document.documentElement.clientWidth';

/** The page's icon link, and the icon decoded as an image of the page (which its CSP must allow). */
const FAVICON = `(async () => {
  const link = document.querySelector('link[rel=icon]');
  const img = new Image();
  img.src = link.href;
  await img.decode();
  return { href: link.href, type: link.type, width: img.naturalWidth };
})()`;

describe('the inspector page at 800 px, its Raw view, Host labels, favicon and HAR names (Chromium)', () => {
  let rewrite: InspectedStack;
  let preserve: InspectedStack;
  let browser: Browser;
  let page: Page;

  const request = (stack: InspectedStack, name: string, path: string, headers: string[] = []) =>
    send({
      port: stack.port,
      path,
      method: 'POST',
      headers: ['Host', `${name}.localhost:${stack.port}`, 'Content-Type', 'application/json', ...headers],
      body: Buffer.from('{"hello":"wire"}'),
    });

  beforeAll(async () => {
    // The README's promise for a machine without the package: one line naming it, not playwright's trace.
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    rewrite = await startInspectedStack(await backend(), 'polish');
    preserve = await startInspectedStack(await backend(), 'polish-same', { hostHeader: 'preserve' });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 800, height: 600 }, acceptDownloads: true });
    await request(rewrite, 'polish', '/short');
    await request(
      rewrite,
      'polish',
      '/api/v2/customers/8c1f4a52-93d1-4c1e-bb0e-77f5a3b8d2a1/invoices?status=open&sort=-created',
      [LONG_NAME, 'yes'],
    );
    await page.goto(rewrite.inspectorUrl);
    await page.locator('#list tbody tr').nth(1).waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await rewrite?.close();
    await preserve?.close();
  });

  it('at 800x600 the page does not scroll sideways and the path column is the widest', async () => {
    await page.locator('#list tbody tr', { hasText: '/api/v2/customers' }).click();
    await page.locator('#detail .title', { hasText: '/api/v2/customers' }).waitFor();
    await page.screenshot({ path: join(shots, 'list-800.png') });
    const geometry = await page.evaluate<Geometry>(GEOMETRY);
    expect(geometry.page.scroll).toBeLessThanOrEqual(geometry.page.client);
    expect(geometry.detail.scroll).toBeLessThanOrEqual(geometry.detail.client);
    expect(geometry.clipped).toEqual([]);
    const [time, method, status, path, duration, size] = geometry.widths;
    for (const other of [time, method, status, duration, size]) expect(path).toBeGreaterThan(other!);
    // The free space goes to the path: more than the compact columns together.
    expect(path).toBeGreaterThan(time! + method! + status!);
  });

  it('a long header name wraps at its hyphens, never inside a word', async () => {
    const { lines, before } = await page.evaluate<{ lines: number; before: string[] }>(
      lineBreaksOf(LONG_NAME),
    );
    expect(lines).toBeGreaterThan(1);
    expect(before).toEqual(Array(lines - 1).fill('-'));
  });

  it('labels the Host the public client sent and the one the backend received when they differ', async () => {
    const hosts = page.locator('#detail table.hosts');
    await expect(hosts.locator('tr[data-host=public] th').textContent()).resolves.toBe(
      'Host (public client)',
    );
    await expect(hosts.locator('tr[data-host=public] td').textContent()).resolves.toBe(
      `polish.localhost:${rewrite.port}`,
    );
    await expect(hosts.locator('tr[data-host=backend] th').textContent()).resolves.toBe(
      'Host (sent to your backend)',
    );
    await expect(hosts.locator('tr[data-host=backend] td').textContent()).resolves.toBe(
      rewrite.tunnel.target.host,
    );
  });

  it('shows the Raw view: the request as the client sent it and the response as the backend gave it', async () => {
    await page.click('#detail [data-tab=raw]');
    const raw = page.locator('#detail [data-view=raw]');
    await raw.locator('pre.raw').nth(1).waitFor();
    await expect(page.locator('#detail [data-view=details]').isHidden()).resolves.toBe(true);
    const [requestText, responseText] = await raw.locator('pre.raw').allTextContents();
    expect(requestText).toMatch(
      /^POST \/api\/v2\/customers\/[^ ]+ HTTP\/1\.1\r\nHost: polish\.localhost:\d+\r\n/,
    );
    expect(requestText).toContain(`${LONG_NAME}: yes\r\n`);
    expect(requestText!.endsWith('\r\n\r\n{"hello":"wire"}')).toBe(true);
    expect(responseText).toMatch(/^HTTP\/1\.1 200 Fine Thanks\r\n/);
    const hops = await raw.locator('h3').allTextContents();
    expect(hops[0]).toMatch(/^Request public client → edge/);
    expect(hops[1]).toMatch(/^Response your backend → agent/);
    await page.screenshot({ path: join(shots, 'raw-800.png') });
    expect(await page.evaluate<boolean>(NO_SIDEWAYS_SCROLL)).toBe(true);
    await page.click('#detail [data-tab=details]');
    await expect(raw.isHidden()).resolves.toBe(true);
  });

  it('names HAR downloads by tunnel, entry (or all) and UTC time', async () => {
    const id = (await page.locator('#detail .facts').textContent())!.match(/^#(\d+)/)![1]!;
    const [all] = await Promise.all([page.waitForEvent('download'), page.click('#har-all')]);
    expect(all.suggestedFilename()).toMatch(/^tunnel2-polish-all-\d{8}-\d{6}\.har$/);
    const [one] = await Promise.all([page.waitForEvent('download'), page.click('#detail [data-action=har]')]);
    expect(one.suggestedFilename()).toMatch(new RegExp(`^tunnel2-polish-${id}-\\d{8}-\\d{6}\\.har$`));
    const link = await page.locator('#detail [data-action=har]').getAttribute('download');
    expect(link).toMatch(new RegExp(`^tunnel2-polish-${id}-\\d{8}-\\d{6}\\.har$`));
  });

  it('has a favicon the page may show (its CSP allows it; nothing fetched from elsewhere)', async () => {
    const icon = await page.evaluate<{ href: string; type: string; width: number }>(FAVICON);
    expect(icon.href).toBe(`${rewrite.inspectorUrl}/favicon.svg`);
    expect(icon.type).toBe('image/svg+xml');
    expect(icon.width).toBeGreaterThan(0);
  });

  it('shows the Host once, with a note, when the backend received the one the client sent (preserve)', async () => {
    await request(preserve, 'polish-same', '/same');
    const other = await browser.newPage({ viewport: { width: 800, height: 600 } });
    try {
      await other.goto(preserve.inspectorUrl);
      await other.locator('#list tbody tr', { hasText: '/same' }).click();
      const hosts = other.locator('#detail table.hosts');
      await hosts.waitFor();
      await expect(hosts.locator('tr').count()).resolves.toBe(1);
      await expect(hosts.locator('tr[data-host=both] th').textContent()).resolves.toBe('Host');
      const text = await hosts.locator('tr[data-host=both] td').textContent();
      expect(text).toBe(
        `polish-same.localhost:${preserve.port} sent by the public client and passed to your backend as is`,
      );
    } finally {
      await other.close();
    }
  });
});
