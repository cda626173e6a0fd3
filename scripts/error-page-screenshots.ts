// Screenshots of the error pages for docs/error-pages.md: real edges, agents and a backend on loopback, each
// failure made as a person meets it, then headless Chromium at 900×640 (the same cases the test
// packages/cli/test/e2e-error-pages.test.ts checks).
//   pnpm exec tsc -b && node scripts/error-page-screenshots.ts
// Writes docs/error-page-<case>.png, and docs/error-page-unknown-tunnel-dark.png.

import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createRequire } from 'node:module';
import { type AddressInfo, createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { connect, type Tunnel } from '@tunnel2/cli';
import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { pino } from 'pino';

// playwright-core is a dev dependency of the CLI package (its browser tests), not of the workspace root.
const requireFromCli = createRequire(new URL('../packages/cli/package.json', import.meta.url));
/** The little of playwright-core's API used here (its types are not visible from the workspace root). */
interface Shooter {
  goto(url: string): Promise<{ status(): number } | null>;
  emulateMedia(options: { colorScheme: 'dark' | 'light' }): Promise<void>;
  screenshot(options: { path: string; fullPage: boolean }): Promise<unknown>;
  close(): Promise<void>;
}
interface Chromium {
  launch(options: { executablePath: string; args: string[] }): Promise<{
    newPage(options: {
      viewport: { width: number; height: number };
      colorScheme: 'dark' | 'light';
      httpCredentials?: { username: string; password: string };
    }): Promise<Shooter>;
    close(): Promise<void>;
  }>;
}
const playwright = (await import(pathToFileURL(requireFromCli.resolve('playwright-core')).href)) as {
  default: { chromium: Chromium };
};
const { chromium } = playwright.default;
const docs = fileURLToPath(new URL('../docs/', import.meta.url));
const cliBin = fileURLToPath(new URL('../packages/cli/bin/tunnel2.js', import.meta.url));
const silent = pino({ level: 'silent' });
const closers: (() => Promise<unknown>)[] = [];

/** A local server that answers 200, except /slow, which it never answers. */
const app = createServer((req, res) => {
  if (req.url !== '/slow') res.end('hello\n');
});
await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
const appPort = (app.address() as AddressInfo).port;
closers.push(() => new Promise((resolve) => app.close(resolve)));

/** Port 3000 when nothing listens there (the page then reads as in the docs' examples), else a closed one. */
async function downPort(): Promise<number> {
  const free3000 = await new Promise<boolean>((resolve) => {
    const socket = tcpConnect(3000, 'localhost');
    socket.once('connect', () => resolve(socket.destroy() && false));
    socket.once('error', () => resolve(true));
  });
  if (free3000) return 3000;
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startEdge(options: EdgeOptions = {}): Promise<{ edge: Edge; port: number }> {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  const { port } = await edge.listen();
  closers.push(() => edge.close(0));
  return { edge, port };
}

async function tunnel(edge: Edge, target: number | string, subdomain: string, more = {}): Promise<Tunnel> {
  const t = await connect({ target, server: edge.url, subdomain, ...more });
  closers.push(() => t.close(0));
  return t;
}

/** A GET through the edge by Host, its status (the rate-limit case spends its burst with it). */
function get(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', headers: { host } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const main = await startEdge({ responseTimeoutMs: 1_000 });
const limitedEdge = await startEdge({ sessionRequestRate: 1, sessionRequestBurst: 1 });
await tunnel(main.edge, `localhost:${await downPort()}`, 'myapp');
await tunnel(main.edge, appPort, 'slow');
await tunnel(main.edge, appPort, 'private', { basicAuth: 'user:secret' });
await tunnel(limitedEdge.edge, appPort, 'popular');
// A crashed agent (SIGKILL), not a closed one: a graceful close frees its name at once ("not found").
const gone = spawn(
  process.execPath,
  [
    cliBin,
    'http',
    String(appPort),
    '--server',
    main.edge.url,
    '--subdomain',
    'gone',
    '--json',
    '--no-inspect',
  ],
  {
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), 'tunnel2-shots-')) },
  },
);
for await (const line of createInterface({ input: gone.stdout! }))
  if (line.includes('"event":"ready"')) break;
gone.kill('SIGKILL');
while (main.edge.sessions.get('gone') !== undefined) await new Promise((resolve) => setImmediate(resolve));

const at = (name: string, port: number, path = '/') => `http://${name}.localhost:${port}${path}`;
const cases: {
  name: string;
  url: string;
  status: number;
  before?: () => Promise<unknown>;
  auth?: boolean;
}[] = [
  { name: 'backend-unreachable', url: at('myapp', main.port), status: 502 },
  { name: 'tunnel-offline', url: at('gone', main.port), status: 502 },
  { name: 'unknown-tunnel', url: at('nobody', main.port), status: 404 },
  { name: 'response-timeout', url: at('slow', main.port, '/slow'), status: 504 },
  { name: 'auth-required', url: at('private', main.port), status: 401, auth: true },
  {
    name: 'rate-limited',
    url: at('popular', limitedEdge.port),
    status: 429,
    before: () => get(limitedEdge.port, `popular.localhost:${limitedEdge.port}`),
  },
];

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  for (const shot of cases) {
    const page = await browser.newPage({
      viewport: { width: 900, height: 640 },
      colorScheme: 'light',
      // A wrong password, given once: the browser then shows the 401 page, as after a cancelled sign-in.
      ...(shot.auth === true ? { httpCredentials: { username: 'user', password: 'wrong' } } : {}),
    });
    let status = 0;
    for (let i = 0; i < 5 && status !== shot.status; i++) {
      await shot.before?.();
      status = (await page.goto(shot.url))?.status() ?? 0;
    }
    if (status !== shot.status) throw new Error(`${shot.name}: ${status}, not ${shot.status}`);
    await page.screenshot({ path: `${docs}error-page-${shot.name}.png`, fullPage: true });
    if (shot.name === 'unknown-tunnel') {
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.screenshot({ path: `${docs}error-page-${shot.name}-dark.png`, fullPage: true });
    }
    await page.close();
    console.log(`docs/error-page-${shot.name}.png (${status})`);
  }
} finally {
  await browser.close();
  for (const close of closers.reverse()) await close();
}
