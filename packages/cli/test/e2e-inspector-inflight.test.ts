import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type InspectedStack, startInspectedStack } from './support/inspected-stack.js';

const CHROMIUM = '/usr/bin/chromium';
/** A held response is answered anyway after this long, so a failing test cannot leave it hanging. */
const HOLD_LIMIT_MS = 30_000;

/**
 * A backend whose answers wait for the test: `/hold/...` answers nothing until released; `/sse` sends its
 * head and one event at once, then ends when released.
 */
function holdingBackend(): { server: Server; release(): void; held(): number } {
  let waiting: (() => void)[] = [];
  const hold = (then: () => void): void => {
    const timer = setTimeout(then, HOLD_LIMIT_MS);
    waiting.push(() => {
      clearTimeout(timer);
      then();
    });
  };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url?.startsWith('/sse') === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write('event: tick\ndata: {"n":1}\n\n');
        hold(() => res.end('event: bye\ndata: {}\n\n'));
        return;
      }
      hold(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
  });
  return {
    server,
    release() {
      const all = waiting;
      waiting = [];
      for (const answer of all) answer();
    },
    held: () => waiting.length,
  };
}

describe('the inspector page shows exchanges in flight (headless Chromium, real edge, agent, backend)', () => {
  const backend = holdingBackend();
  let stack: InspectedStack;
  let browser: Browser;
  let page: Page;
  let port: number;

  const request = (path: string, method = 'GET') =>
    send({
      port,
      path,
      method,
      headers: ['Host', `live.localhost:${port}`, 'X-Hook', 'order-paid'],
      ...(method === 'POST' ? { body: Buffer.from('{"order":7}') } : {}),
    });
  const live = () => page.locator('#inflight tr');
  const entries = () => page.locator('#entries tr');

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    await new Promise<void>((resolve) => backend.server.listen(0, '127.0.0.1', resolve));
    stack = await startInspectedStack(backend.server, 'live');
    ({ port } = stack);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(stack.tunnel.inspectorUrl!);
    await page.locator('#list-empty', { hasText: 'Send a request to' }).waitFor();
  });

  afterAll(async () => {
    backend.release();
    await browser?.close();
    await stack?.close();
  });

  it('a held request shows in flight (method, path, headers so far), then becomes its entry without reload', async () => {
    await page.evaluate('window.notReloaded = true');
    const answered = request('/hold/order?id=7', 'POST');
    const row = live().filter({ hasText: '/hold/order?id=7' });
    await row.waitFor();
    expect(await row.locator('td.method').textContent()).toBe('POST');
    expect(await row.locator('.live-dot').count()).toBe(1);
    expect(await row.locator('td.status').textContent()).toBe('…');
    // The empty state gives way to the running exchange, and the count says so.
    expect(await page.locator('#list-empty').textContent()).toBe('');
    expect(await page.locator('#count').textContent()).toContain('1 in flight');

    await row.click();
    const detail = page.locator('#detail');
    await detail.locator('.live-note', { hasText: 'Still running' }).waitFor();
    await detail.locator('.pairs tr', { hasText: 'X-Hook' }).filter({ hasText: 'order-paid' }).waitFor();
    await detail.locator('.pairs tr', { hasText: 'id' }).filter({ hasText: '7' }).waitFor(); // the query

    expect(backend.held()).toBe(1);
    backend.release();
    expect((await answered).status).toBe(200);
    // The row leaves the group; its entry takes its place, and the open detail follows it.
    const entry = entries().filter({ hasText: '/hold/order?id=7' });
    await entry.waitFor();
    expect(await entry.locator('td.status').textContent()).toBe('200');
    await expect.poll(() => live().count()).toBe(0);
    await detail.locator('.title .status', { hasText: '200' }).waitFor();
    expect(await detail.locator('.live-note').count()).toBe(0);
    expect(await page.evaluate<boolean>("'notReloaded' in window")).toBe(true);
  });

  it('an SSE stream shows in flight with its status and bytes so far; filters and j/k include it', async () => {
    const streamed = request('/sse/orders');
    const row = live().filter({ hasText: '/sse/orders' });
    await row.waitFor();
    await expect.poll(() => row.locator('td.status').textContent()).toBe('200');
    // The first event has reached the client: the bytes so far are counted.
    await expect.poll(() => row.locator('td.num').last().textContent()).not.toContain('↓0 B');

    await page.fill('#f-path', '/no-such-path');
    await expect.poll(() => live().count()).toBe(0);
    await page.fill('#f-path', 'SSE/ORD');
    await expect.poll(() => live().count()).toBe(1);
    await page.selectOption('#f-method', 'POST');
    await expect.poll(() => live().count()).toBe(0);
    await page.selectOption('#f-method', '');
    await page.fill('#f-path', '');
    await expect.poll(() => live().count()).toBe(1);

    // Keyboard: the running row is the first of the list, above the entries.
    await page.evaluate('document.activeElement?.blur()');
    await page.keyboard.press('Escape');
    await page.keyboard.press('k');
    await page.keyboard.press('k');
    expect(await page.locator('#list tbody tr.selected td.path').textContent()).toBe('/sse/orders');
    await page.keyboard.press('j');
    expect(await page.locator('#list tbody tr.selected td.path').textContent()).toBe('/hold/order?id=7');
    await page.keyboard.press('k');
    await page.keyboard.press('Enter');
    await page.locator('#detail .live-note', { hasText: 'response head came' }).waitFor();

    backend.release();
    const res = await streamed;
    expect(res.body.toString()).toContain('event: bye');
    await entries().filter({ hasText: '/sse/orders' }).waitFor();
    await expect.poll(() => live().count()).toBe(0);
    await page.locator('#detail .title .status', { hasText: '200' }).waitFor();
  });

  it('with more running than the API lists (100), the count says how many more there are', async () => {
    const answers = Array.from({ length: 103 }, (_, i) => request(`/hold/many?n=${i}`));
    await expect.poll(() => backend.held(), { timeout: 20_000 }).toBe(103);
    await expect
      .poll(() => page.locator('#count').textContent(), { timeout: 10_000 })
      .toContain('100 in flight (3 more running, not listed)');
    expect(await live().count()).toBe(100);
    backend.release();
    for (const answer of await Promise.all(answers)) expect(answer.status).toBe(200);
    await expect.poll(() => live().count(), { timeout: 10_000 }).toBe(0);
    await expect.poll(() => page.locator('#count').textContent()).not.toContain('in flight');
  });
});
