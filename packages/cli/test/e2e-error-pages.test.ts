// Every kind of error page as a person meets it: real Chromium loading a tunnel URL whose local server is
// down, whose agent is gone, that names no tunnel, that times out, that asks for a password, that is rate
// limited. Each page must say what happened, where, its code and what to do, load nothing besides the
// document, and is saved as a screenshot (scripts/error-page-screenshots.ts writes the docs' copies).
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge, type EdgeOptions } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { spawnCli } from './support/processes.js';
import { type Backend, silent, until } from './support/stack.js';

const CHROMIUM = '/usr/bin/chromium';
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startEdge(options: EdgeOptions = {}) {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, port, url };
}

async function tunnelTo(target: number | string, server: string, name: string, more = {}): Promise<Tunnel> {
  const tunnel = await connect({ target, server, subdomain: name, ...more });
  cleanups.push(() => tunnel.close(0));
  return tunnel;
}

let browser: Browser;
let backend: Backend;
const shots = mkdtempSync(join(tmpdir(), 'tunnel2-error-pages-'));

beforeAll(async () => {
  // No silent skip: .ci/run installs Debian's chromium, and this test must run there.
  expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
  backend = await createTestBackend();
  cleanups.push(() => backend.close());
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  cleanups.push(() => browser.close());
});

interface Expected {
  status: number;
  code: string;
  /** Text of the "Where" line. */
  where: string;
  /** Words of "What to do". */
  todo: string;
}

interface VisitOptions {
  /** Runs ahead of each load. */
  before?: () => Promise<unknown>;
  /**
   * A load that did not get the expected status is tried again, up to this many times (a rate limit is
   * reached by asking, and a slow machine may refill it meanwhile). Default 1.
   */
  attempts?: number;
  /** What the browser answers a Basic challenge with, once (then it shows the 401 page, as a person who cancels). */
  httpCredentials?: { username: string; password: string };
  /** Request headers the browser adds. */
  extraHTTPHeaders?: Record<string, string>;
}

/** Loads `url` in a fresh page (light scheme) and checks what a person reads there; returns the page for more checks. */
async function visit(name: string, url: string, expected: Expected, options: VisitOptions = {}) {
  const page = await browser.newPage({
    viewport: { width: 900, height: 640 },
    colorScheme: 'light',
    ...(options.httpCredentials === undefined ? {} : { httpCredentials: options.httpCredentials }),
    ...(options.extraHTTPHeaders === undefined ? {} : { extraHTTPHeaders: options.extraHTTPHeaders }),
  });
  cleanups.push(() => page.close());
  let requests: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  let response: Awaited<ReturnType<typeof page.goto>> = null;
  for (let i = 0; i < (options.attempts ?? 1) && response?.status() !== expected.status; i++) {
    await options.before?.();
    requests = [];
    response = await page.goto(url);
  }
  expect(response?.status()).toBe(expected.status);
  const headers = response?.headers() ?? {};
  expect(headers['x-tunnel2-error']).toBe(expected.code);
  expect(headers['content-type']).toBe('text/html; charset=utf-8');
  expect(headers['content-security-policy']).toMatch(/^default-src 'none'; style-src 'unsafe-inline'/);
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers.vary).toBe('Accept');
  expect(await page.title()).toMatch(new RegExp(`^${expected.status} `));
  // biome-ignore lint/performance/useDomNodeTextContent: the text as rendered, what a person reads
  const text = await page.locator('body').innerText();
  expect(text).toContain(expected.code);
  expect(text).toContain(expected.where);
  expect(text).toContain(expected.todo);
  // The document alone: no style sheet, font, image or script fetched (favicon requests are not pages').
  expect(requests.filter((r) => !r.endsWith('/favicon.ico'))).toEqual([url]);
  const shot = join(shots, `${name}.png`);
  await page.screenshot({ path: shot, fullPage: true });
  expect(statSync(shot).size).toBeGreaterThan(1000);
  return { page, response };
}

describe('error pages in Chromium', () => {
  it('local server down: names the local server and says to start it', async () => {
    const { port, url } = await startEdge();
    const down = await closedPort();
    await tunnelTo(`localhost:${down}`, url, 'down');
    await visit('backend-unreachable', `http://down.localhost:${port}/`, {
      status: 502,
      code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
      where: `your local server at localhost:${down}`,
      todo: `Start your local server on localhost:${down}`,
    });
  });

  it('tunnel offline: names the agent and says to start it again', async () => {
    const { edge, port, url } = await startEdge();
    const agent = spawnCli(['http', String(backend.port), '--server', url, '--subdomain', 'gone', '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    // A crash, not a close: a graceful close frees the name at once, and the page would be "not found".
    agent.kill('SIGKILL');
    await agent.exited;
    await until(() => edge.sessions.get('gone') === undefined);
    await visit('tunnel-offline', `http://gone.localhost:${port}/`, {
      status: 502,
      code: 'TUNNEL2_ERR_TUNNEL_OFFLINE',
      where: 'the tunnel2 agent (tunnel2 http) that serves this URL',
      todo: 'tunnel2 http <port>',
    });
  });

  it('unknown tunnel: names the edge and says to check the URL, in light and dark', async () => {
    const { port } = await startEdge();
    const { page } = await visit('unknown-tunnel', `http://nobody.localhost:${port}/`, {
      status: 404,
      code: 'TUNNEL2_ERR_UNKNOWN_SESSION',
      where: `the tunnel2 edge (nobody.localhost:${port})`,
      todo: 'Check the URL',
    });
    const background = () => page.evaluate('getComputedStyle(document.body).backgroundColor');
    const light = await background();
    await page.emulateMedia({ colorScheme: 'dark' });
    expect(await background()).not.toBe(light);
    await page.screenshot({ path: join(shots, 'unknown-tunnel-dark.png'), fullPage: true });
  });

  it('hostile values: shown as text, nothing injected runs or loads', async () => {
    const { port } = await startEdge();
    // A browser percent-encodes markup in a URL; a header it sends as given (the bare edge keeps any id).
    const hostile = `<img src=/x onerror="document.title='pwned'"><script>document.title='pwned'</script>`;
    const { page } = await visit(
      'hostile-values',
      `http://localhost:${port}/session/${encodeURIComponent(hostile)}/`,
      {
        status: 404,
        code: 'TUNNEL2_ERR_UNKNOWN_SESSION',
        where: `the tunnel2 edge (localhost:${port})`,
        todo: 'Check the URL',
      },
      { extraHTTPHeaders: { 'x-request-id': hostile } },
    );
    expect(await page.locator('img, script').count()).toBe(0);
    expect(await page.title()).toBe('404 Tunnel not found');
    expect(await page.locator('dd code').last().textContent()).toBe(hostile);
  });

  it('timeout: the agent or local server did not answer in time', async () => {
    const { port, url } = await startEdge({ responseTimeoutMs: 500 });
    await tunnelTo(backend.port, url, 'slow');
    await visit('response-timeout', `http://slow.localhost:${port}/loadtest/delay/5000`, {
      status: 504,
      code: 'TUNNEL2_ERR_RESPONSE_TIMEOUT',
      where: 'the tunnel2 agent (tunnel2 http) that serves this URL',
      todo: 'Check that your local server answers this request',
    });
  });

  it('basic auth: the page behind a sign-in that failed, WWW-Authenticate kept', async () => {
    const { port, url } = await startEdge();
    await tunnelTo(backend.port, url, 'guarded', { basicAuth: 'user:secret' });
    const { response } = await visit(
      'auth-required',
      `http://guarded.localhost:${port}/`,
      {
        status: 401,
        code: 'TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED',
        where: `the tunnel2 edge (guarded.localhost:${port})`,
        todo: '--basic-auth',
      },
      { httpCredentials: { username: 'user', password: 'wrong' } },
    );
    expect(response?.headers()['www-authenticate']).toMatch(/^Basic /);
  });

  it('rate limited: says how long to wait, Retry-After kept', async () => {
    const { port, url } = await startEdge({ sessionRequestRate: 1, sessionRequestBurst: 1 });
    await tunnelTo(backend.port, url, 'limited');
    const host = `limited.localhost:${port}`;
    // The burst (one request) is spent just before the page's; should a token come back meanwhile (a
    // slow machine), the page is loaded again after spending it once more.
    const spend = () => send({ port, path: '/loadtest/delay/0', headers: ['Host', host] });
    const { response } = await visit(
      'rate-limited',
      `http://${host}/`,
      {
        status: 429,
        code: 'TUNNEL2_ERR_RATE_LIMITED',
        where: `the tunnel2 edge (${host})`,
        todo: 'Retry in',
      },
      { before: spend, attempts: 5 },
    );
    expect(Number(response?.headers()['retry-after'])).toBeGreaterThanOrEqual(1);
    console.log(`error page screenshots: ${shots}`);
  });
});
