import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge } from '@tunnel2/edge';
import { chromium } from 'playwright-core';
import { afterAll, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { startBrowserApp } from './support/browser-app.js';
import { silent } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const CHROMIUM = '/usr/bin/chromium';

it('a real browser loads a page through the tunnel whose WebSocket and SSE work', async () => {
  // No silent skip: .ci/run installs Debian's chromium, and this test must run there.
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
  const app = await startBrowserApp();
  cleanups.push(() => app.close());
  const edge = buildEdge({ port: 0, logger: silent });
  const { port } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const tunnel = await connect({ target: app.port, server: edge.url, subdomain: 'browser' });
  cleanups.push(() => tunnel.close(0));

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  cleanups.push(() => browser.close());
  const page = await browser.newPage();
  // Chromium resolves every *.localhost name to loopback, so the host-routed URL works as is.
  await page.goto(`http://browser.localhost:${port}/`);
  await page.locator('#status', { hasText: /^done$/ }).waitFor({ timeout: 20_000 });
  const echoes = await page.locator('#ws li').allTextContents();
  const events = await page.locator('#sse li').allTextContents();
  expect(echoes).toEqual([0, 1, 2, 3, 4].map((i) => `echo: message ${i}`));
  expect(events).toEqual(['event 0', 'event 1', 'event 2']);
  const shot = join(mkdtempSync(join(tmpdir(), 'tunnel2-browser-')), 'page.png');
  await page.screenshot({ path: shot, fullPage: true });
  expect(statSync(shot).size).toBeGreaterThan(1000);
  console.log(`browser screenshot: ${shot}`);
}, 60_000);
