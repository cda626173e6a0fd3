// Screenshots of the request inspector for docs/: a real edge, agent (inspector on) and backend on loopback,
// a few typical webhook/API requests through the tunnel (a replay among them, an SSE stream still running),
// then headless Chromium at 1280×800.
//   pnpm exec tsc -b && node scripts/inspector-screenshots.ts [--dark]
// Writes docs/inspector-list.png, inspector-detail.png, inspector-raw.png (the detail's Raw tab) and
// inspector-narrow.png (the same page in an 800×600 window) (with --dark: docs/inspector-*-dark.png).

import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { crc32, deflateSync, gzipSync } from 'node:zlib';
import { connect } from '@tunnel2/cli';
import { buildEdge } from '@tunnel2/edge';
import { pino } from 'pino';

// playwright-core is a dev dependency of the CLI package (its browser tests), not of the workspace root.
const requireFromCli = createRequire(new URL('../packages/cli/package.json', import.meta.url));
/** The little of playwright-core's API used here (its types are not visible from the workspace root). */
interface Shooter {
  goto(url: string): Promise<unknown>;
  locator(selector: string): {
    first(): { waitFor(): Promise<void> };
    nth(i: number): { waitFor(): Promise<void> };
  };
  waitForTimeout(ms: number): Promise<void>;
  keyboard: { press(key: string): Promise<void> };
  click(selector: string): Promise<void>;
  setViewportSize(size: { width: number; height: number }): Promise<void>;
  screenshot(options: { path: string }): Promise<unknown>;
}
interface Chromium {
  launch(options: { executablePath: string; args: string[] }): Promise<{
    newPage(options: {
      viewport: { width: number; height: number };
      colorScheme: 'dark' | 'light';
      reducedMotion: 'reduce' | 'no-preference';
    }): Promise<Shooter>;
    close(): Promise<void>;
  }>;
}
const playwright = (await import(pathToFileURL(requireFromCli.resolve('playwright-core')).href)) as {
  default: { chromium: Chromium };
};
const { chromium } = playwright.default;

const dark = process.argv.includes('--dark');
const docs = fileURLToPath(new URL('../docs/', import.meta.url));
/** A 32×32 gradient PNG, drawn here so the script carries no binary file. */
function gradientPng(): Buffer {
  const size = 32;
  const rows: number[] = [];
  for (let y = 0; y < size; y++) {
    rows.push(0);
    for (let x = 0; x < size; x++) rows.push(40 + x * 6, 110 + y * 4, 220, 255);
  }
  const chunk = (type: string, data: Buffer): Buffer => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 6, 0, 0, 0], 8); // 8 bits, RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.from(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
const PNG = gradientPng();

/** The SSE stream shown in flight: it ends when the screenshots are taken. */
const streams: ServerResponse[] = [];

function answer(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const url = req.url ?? '/';
  if (url.startsWith('/events')) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`event: order.created\ndata: ${JSON.stringify({ id: 'ord_1042', total: 4900 })}\n\n`);
    streams.push(res);
  } else if (url.startsWith('/webhooks/shopify')) {
    // The handler crashed the connection: the agent answers 502 with its x-tunnel2-error code.
    res.socket?.destroy();
  } else if (url.startsWith('/webhooks/stripe')) {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(gzipSync(JSON.stringify({ received: true, id: 'evt_1PqX9c2eZvKYlo2C', handled_in_ms: 12 })));
  } else if (url.startsWith('/webhooks/github')) {
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(
      `TypeError: Cannot read properties of undefined (reading 'sha')\n    at handlePush (hooks.js:41:27)`,
    );
  } else if (url.startsWith('/api/users')) {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    res.end(
      JSON.stringify({
        page: 2,
        users: [
          { id: 41, name: 'Ada' },
          { id: 42, name: 'Linus' },
        ],
      }),
    );
  } else if (url.startsWith('/logo.png')) {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(PNG);
  } else if (url.startsWith('/login')) {
    res.writeHead(302, { location: '/dashboard', 'set-cookie': 'session=abc123; HttpOnly' });
    res.end();
  } else if (url.startsWith('/soap')) {
    res.writeHead(200, { 'content-type': 'application/xml' });
    res.end('<?xml version="1.0"?><Envelope><Body><Status code="ok">accepted</Status></Body></Envelope>');
  } else {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'not found', path: url, bytes: body.length }));
  }
}

const backend = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => answer(req, res, Buffer.concat(chunks)));
});
await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
const { port } = await edge.listen();
const tunnel = await connect({
  target: (backend.address() as AddressInfo).port,
  server: edge.url,
  subdomain: 'myapp',
  inspect: { port: 0 },
});

function send(method: string, path: string, headers: Record<string, string>, body = ''): Promise<void> {
  return sendTo(method, path, headers, body, false);
}

/** `headOnly`: resolves once the response head came (a stream left running). */
function sendTo(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string,
  headOnly: boolean,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      headers: { host: `myapp.localhost:${port}`, 'user-agent': 'Stripe/1.0', ...headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      if (headOnly) resolve();
      else res.on('end', resolve);
    });
    req.end(body);
  });
}

const event = {
  id: 'evt_1PqX9c2eZvKYlo2C',
  object: 'event',
  type: 'invoice.paid',
  created: 1732521600,
  data: { object: { id: 'in_1PqX9a', amount_paid: 2900, currency: 'usd', customer: 'cus_R2d2', paid: true } },
};
// Started first: an SSE stream the page shows in flight while the rest arrive.
await sendTo('GET', '/events/orders', { accept: 'text/event-stream' }, '', true);
await send('GET', '/api/users?page=2&sort=name', { accept: 'application/json' });
await send('GET', '/logo.png', { accept: 'image/*' });
await send(
  'POST',
  '/login',
  { 'content-type': 'application/x-www-form-urlencoded' },
  'user=ada&password=hunter2',
);
await send(
  'POST',
  '/webhooks/github',
  { 'content-type': 'application/json', 'x-github-event': 'push' },
  '{"ref":"refs/heads/main","commits":[]}',
);
await send('GET', '/favicon.ico', {});
await send('POST', '/soap/orders', { 'content-type': 'application/xml' }, '<order><id>7</id></order>');
await send(
  'POST',
  '/webhooks/stripe?attempt=1',
  {
    'content-type': 'application/json',
    'stripe-signature': 't=1732521600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd',
  },
  JSON.stringify(event),
);
await send(
  'POST',
  '/webhooks/shopify',
  { 'content-type': 'application/json', 'x-shopify-topic': 'orders/create' },
  '{"id":820982911946154500,"total_price":"49.00"}',
);
// The Stripe webhook replayed from the inspector (as its Replay button does): a new entry linked to it.
const { entries } = (await (
  await fetch(`${tunnel.inspectorUrl}/api/entries?path=/webhooks/stripe`)
).json()) as {
  entries: { id: string }[];
};
await fetch(`${tunnel.inspectorUrl}/api/entries/${entries[0]!.id}/replay`, { method: 'POST' });

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const page = await browser.newPage({
    viewport: { width: 1280, height: 800 },
    colorScheme: dark ? 'dark' : 'light',
    // The in-flight dot is drawn still (it pulses otherwise): a picture must not catch it faded.
    reducedMotion: 'reduce',
  });
  await page.goto(tunnel.inspectorUrl!);
  await page.locator('#entries tr').nth(8).waitFor();
  await page.locator('#inflight tr').first().waitFor();
  // A second poll of the stream: its duration has ticked past zero.
  await page.waitForTimeout(1500);
  const suffix = dark ? '-dark' : '';
  // The stream in flight, the replay, the Shopify failure, then the original Stripe webhook: selected, opened.
  for (let i = 0; i < 4; i++) await page.keyboard.press('j');
  await page.screenshot({ path: `${docs}inspector-list${suffix}.png` });
  await page.keyboard.press('Enter');
  await page.locator('#detail .j-key').first().waitFor();
  await page.screenshot({ path: `${docs}inspector-detail${suffix}.png` });
  await page.click('#detail [data-tab=raw]');
  await page.locator('#detail pre.raw').nth(1).waitFor();
  await page.screenshot({ path: `${docs}inspector-raw${suffix}.png` });
  await page.click('#detail [data-tab=details]');
  await page.setViewportSize({ width: 800, height: 600 });
  await page.screenshot({ path: `${docs}inspector-narrow${suffix}.png` });
  console.log(`wrote ${docs}inspector-{list,detail,raw,narrow}${suffix}.png`);
} finally {
  await browser.close();
  for (const stream of streams) stream.end();
  await tunnel.close(0);
  await edge.close(0);
  backend.close();
}
