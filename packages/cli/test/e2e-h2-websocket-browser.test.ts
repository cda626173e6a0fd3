import { existsSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type BrowserApp, startBrowserApp } from './support/browser-app.js';
import { type EdgeCertificates, makeEdgeCertificates, startAgent, stop } from './support/grpc-stack.js';
import type { Spawned } from './support/processes.js';
import { silent } from './support/stack.js';

// Chromium over the TLS edge (ALPN h2): a page through the tunnel whose script opens a WebSocket to the same
// origin, and the edge's own landing page. The edge announces RFC 8441 (SETTINGS_ENABLE_CONNECT_PROTOCOL)
// on one node, so Chromium may open the WebSocket as a stream of the page's HTTP/2 connection; the test
// counts which way each WebSocket came (an extended CONNECT stream, or an HTTP/1.1 upgrade).

const CHROMIUM = '/usr/bin/chromium';
const NAME = 'browser';

let tls: EdgeCertificates;
let app: BrowserApp;
let edge: Edge;
let port: number;
let agent: Spawned;
/** WebSockets to the page's /ws that reached the edge as RFC 8441 streams, and as HTTP/1.1 upgrades. */
const came = { rfc8441: 0, http1: 0 };

beforeAll(async () => {
  tls = await makeEdgeCertificates([NAME]);
  app = await startBrowserApp();
  edge = buildEdge({ port: 0, logger: silent, tls: { pairs: [{ cert: tls.certFile, key: tls.keyFile }] } });
  // Before the edge's own listener, which makes an RFC 8441 request its HTTP/1.1 form.
  edge.app.server.prependListener('request', (req: IncomingMessage) => {
    if (req.headers[':protocol'] === 'websocket') came.rfc8441++;
  });
  edge.app.server.prependListener('upgrade', (req: IncomingMessage) => {
    if (req.url === '/ws') came.http1++;
  });
  ({ port } = await edge.listen());
  agent = await startAgent(app.port, edge.url, NAME, { h2c: false, ca: tls.ca.file });
});

afterAll(async () => {
  if (agent !== undefined) await stop(agent);
  await edge?.close(0);
  await app?.close();
  await tls?.dispose();
});

it("Chromium's WebSocket through the TLS edge echoes, and its page and the landing page came over h2", async () => {
  // No silent skip: .ci/run installs Debian's chromium, and this test must run there.
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // The test CA is not in Chromium's store.
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--ignore-certificate-errors',
    ],
  });
  try {
    const page = await browser.newPage();
    // Chromium resolves every *.localhost name to loopback, so the host-routed URL works as is.
    await page.goto(`https://${NAME}.localhost:${port}/`);
    await page.locator('#status', { hasText: /^done$/ }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#ws li').allTextContents()).toEqual(
      [0, 1, 2, 3, 4].map((i) => `echo: message ${i}`),
    );
    // A string: the expression runs in the page, whose DOM types this Node project does not compile against.
    const navigation = "performance.getEntriesByType('navigation')[0].nextHopProtocol";
    expect(await page.evaluate(navigation)).toBe('h2');
    expect(came.rfc8441 + came.http1).toBe(1);
    console.log(
      `Chromium ${browser.version()} opened its WebSocket ${came.rfc8441 === 1 ? 'as an RFC 8441 stream of the h2 connection' : 'over an HTTP/1.1 upgrade'}`,
    );
    expect(came.rfc8441).toBe(1);

    // The edge's own landing page: over h2 too, where it used to be the 404.
    const landing = await page.goto(`https://localhost:${port}/`);
    expect(landing?.status()).toBe(200);
    expect(await landing?.text()).toContain('tunnel2 edge');
    expect(await page.evaluate(navigation)).toBe('h2');
  } finally {
    await browser.close();
  }
}, 60_000);
