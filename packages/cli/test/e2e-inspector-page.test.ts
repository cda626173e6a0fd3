import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { gzipSync } from 'node:zlib';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type InspectedStack, startInspectedStack } from './support/inspected-stack.js';

const CHROMIUM = '/usr/bin/chromium';

interface Seen {
  method: string;
  url: string;
  body: string;
}

/** Records what reaches it and echoes the request back as JSON, so a changed request changes the response. */
function echoBackend(seen: Seen[]): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, url: req.url, echoed: body }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('the inspector page in headless Chromium (real edge, agent, backend)', () => {
  const seen: Seen[] = [];
  let stack: InspectedStack;
  let browser: Browser;
  let page: Page;
  let port: number;

  const post = (path: string, body: string, type = 'application/json') =>
    send({
      port,
      path,
      method: 'POST',
      headers: [
        'Host',
        `page.localhost:${port}`,
        'Content-Type',
        type,
        'X-Hook',
        'stripe',
        'Authorization',
        'Bearer s3cret',
      ],
      body: Buffer.from(body),
    });
  const rows = () => page.locator('#list tbody tr');
  const row = (path: string) => rows().filter({ hasText: path });

  beforeAll(async () => {
    // No silent skip: .ci/run installs Debian's chromium, and this test must run there.
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    stack = await startInspectedStack(await echoBackend(seen), 'page');
    ({ port } = stack);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
    await page.goto(stack.tunnel.inspectorUrl!);
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('says where to send requests, then shows one live (no reload) with headers and pretty JSON', async () => {
    await page.locator('#list-empty', { hasText: `Send a request to ${stack.tunnel.url}` }).waitFor();
    // A reload would lose this mark: the row must come over the page's event stream.
    await page.evaluate('window.notReloaded = true');
    const res = await post('/hooks/stripe?attempt=1', '{"type":"invoice.paid","amount":2900}');
    expect(res.status).toBe(200);
    await row('/hooks/stripe?attempt=1').waitFor();
    expect(await page.evaluate<boolean>("'notReloaded' in window")).toBe(true);
    await expect.poll(() => page.locator('#list-empty').textContent()).toBe('');

    await row('/hooks/stripe').click();
    const detail = page.locator('#detail');
    await detail.locator('.title', { hasText: '/hooks/stripe?attempt=1' }).waitFor();
    await detail.locator('.pairs tr', { hasText: 'X-Hook' }).filter({ hasText: 'stripe' }).waitFor();
    const json = detail.locator('pre.json').first();
    expect(await json.textContent()).toBe('{\n  "type": "invoice.paid",\n  "amount": 2900\n}');
    expect(await json.locator('.j-key').allTextContents()).toEqual(['"type"', '"amount"']);
    await detail.locator('.pairs tr', { hasText: 'attempt' }).waitFor(); // the query parameters
  });

  it('filters by text inside bodies (server-side): only the matching entry stays', async () => {
    await post('/other', 'plain words, nothing else', 'text/plain');
    await row('/other').waitFor();
    expect(await rows().count()).toBe(2);
    await page.fill('#f-body', 'INVOICE.PAID');
    await expect.poll(() => rows().count()).toBe(1);
    expect(await rows().first().textContent()).toContain('/hooks/stripe');
    await page.fill('#f-body', 'no entry has this');
    await page.locator('#list-empty', { hasText: 'No request matches' }).waitFor();
    await page.fill('#f-body', '');
    await expect.poll(() => rows().count()).toBe(2);
  });

  it('with a filter set, a steady stream of new entries still reaches the list (reloads are throttled)', async () => {
    await page.fill('#f-path', '/stream');
    await page.locator('#list-empty', { hasText: 'No request matches' }).waitFor();
    // Requests keep coming (each one's event would restart a debounce): the list must fill while they do.
    let shown = 0;
    for (let i = 0; i < 500 && shown === 0; i++) {
      await post(`/stream/${i}`, 'x', 'text/plain');
      shown = await rows().count();
    }
    expect(shown).toBeGreaterThan(0);
    await page.fill('#f-path', '');
    await expect.poll(() => rows().count()).toBeGreaterThan(shown);
    // The unfiltered list is back (a throttled reload of the filtered one may land first): the older
    // entries show again.
    await row('/other').waitFor();
  });

  it('moves the selection with j/k and arrows, opens with Enter, closes with Esc, / focuses the search', async () => {
    await page.evaluate('document.activeElement?.blur()');
    await page.keyboard.press('Escape');
    await page.locator('#detail .empty').waitFor();
    const selectedPath = () => page.locator('#list tbody tr.selected td.path').textContent();
    // Keys move through the rows on the page: wait until it shows the whole list, the stripe entry still
    // selected, and nothing in flight above it (the in-flight group is polled once a second).
    await page.locator('#list tbody tr.selected td.path', { hasText: '/hooks/stripe' }).waitFor();
    await expect.poll(() => page.locator('#inflight tr').count()).toBe(0);
    await page.keyboard.press('j'); // the stripe entry, still selected, is the last row: j stays there
    await page.keyboard.press('k');
    expect(await selectedPath()).toBe('/other');
    await page.keyboard.press('j');
    expect(await selectedPath()).toBe('/hooks/stripe?attempt=1');
    await page.keyboard.press('ArrowUp');
    expect(await selectedPath()).toBe('/other');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.locator('#detail .title', { hasText: '/hooks/stripe' }).waitFor();
    await page.keyboard.press('/');
    expect(await page.evaluate<string>('document.activeElement.id')).toBe('f-path');
    await page.keyboard.press('Escape'); // leaves the search box
    await page.keyboard.press('Escape'); // closes the detail
    await page.locator('#detail .empty').waitFor();
  });

  it('replays: the backend receives it again and a new entry, linked to the original, opens', async () => {
    await row('/hooks/stripe').first().click();
    const originalId = await rows().filter({ hasText: '/hooks/stripe' }).first().getAttribute('data-id');
    const before = seen.length;
    await page.click('#detail [data-action=replay]');
    await page.locator('#detail .note', { hasText: `Replay of #${originalId}` }).waitFor();
    expect(seen.length).toBe(before + 1);
    expect(seen.at(-1)).toEqual({
      method: 'POST',
      url: '/hooks/stripe?attempt=1',
      body: '{"type":"invoice.paid","amount":2900}',
    });
    await page.locator('#list tbody tr .badge.replay', { hasText: `#${originalId}` }).waitFor();
  });

  it('edits and replays (method, path, body reach the backend), then compares with the original', async () => {
    const original = rows().filter({ hasText: '/hooks/stripe' }).filter({ hasNotText: '↻' });
    const originalId = await original.getAttribute('data-id');
    await original.click();
    await page.locator('#detail .title', { hasText: '/hooks/stripe' }).waitFor();
    await page.click('#detail [data-action=edit]');
    await page.fill('#edit-method', 'PUT');
    await page.fill('#edit-path', '/hooks/edited?x=2');
    await page.fill('#edit-body', '{"type":"invoice.voided"}');
    const before = seen.length;
    await page.click('#edit-send');
    await page.locator('#detail .title', { hasText: '/hooks/edited?x=2' }).waitFor();
    expect(seen.length).toBe(before + 1);
    expect(seen.at(-1)).toEqual({
      method: 'PUT',
      url: '/hooks/edited?x=2',
      body: '{"type":"invoice.voided"}',
    });

    await page.click('#detail [data-action=compare]');
    const compare = page.locator('#detail .compare');
    await compare.waitFor();
    expect(await compare.locator('h3').textContent()).toContain(`#${originalId} (original`);
    const removed = await compare.locator('.diff').last().locator('.del').allTextContents();
    const added = await compare.locator('.diff').last().locator('.add').allTextContents();
    expect(removed).toEqual(
      expect.arrayContaining(['-   "method": "POST",\n', expect.stringContaining('invoice.paid')]),
    );
    expect(added).toEqual(
      expect.arrayContaining(['+   "method": "PUT",\n', expect.stringContaining('invoice.voided')]),
    );
    // The unchanged lines are shown as context, neither added nor removed.
    expect(await compare.locator('.diff').last().locator('.same').first().textContent()).toBe('  {\n');
  });

  it('copies as curl (falls back without clipboard permission) and shows the command', async () => {
    await row('/other').click();
    await page.locator('#detail .title', { hasText: '/other' }).waitFor();
    await page.click('#detail [data-action=curl]');
    const command = await page.locator('#detail textarea.curl').inputValue();
    expect(command).toContain('curl');
    expect(command).toContain(`${String(stack.tunnel.url).replace(/\/$/, '')}/other`);
    expect(command).toContain('plain words, nothing else');
  });

  it('exports HAR 1.2 of all entries as a download, redacted by default', async () => {
    const count = await rows().count();
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#har-all')]);
    const har = JSON.parse(readFileSync((await download.path())!, 'utf8')) as {
      log: {
        version: string;
        entries: { request: { url: string; headers: { name: string; value: string }[] } }[];
      };
    };
    expect(har.log.version).toBe('1.2');
    expect(har.log.entries).toHaveLength(count);
    const auth = har.log.entries
      .flatMap((e) => e.request.headers)
      .filter((h) => h.name.toLowerCase() === 'authorization');
    expect(auth.length).toBeGreaterThan(0);
    expect(new Set(auth.map((h) => h.value))).toEqual(new Set(['[redacted]']));

    // One entry, not redacted.
    await page.uncheck('#redact');
    await row('/other').click();
    await page.locator('#detail .title', { hasText: '/other' }).waitFor();
    const [one] = await Promise.all([page.waitForEvent('download'), page.click('#detail [data-action=har]')]);
    const single = JSON.parse(readFileSync((await one.path())!, 'utf8')) as typeof har;
    expect(single.log.entries.map((e) => new URL(e.request.url).pathname)).toEqual(['/other']);
    expect(single.log.entries[0]!.request.headers).toContainEqual({
      name: 'Authorization',
      value: 'Bearer s3cret',
    });
  });

  it('renders each kind of request body: form fields, bad JSON with its position, hex, multipart, XML, gzip, image', async () => {
    const openBody = async (path: string, body: Buffer, headers: string[]) => {
      await send({
        port,
        path,
        method: 'POST',
        headers: ['Host', `page.localhost:${port}`, ...headers],
        body,
      });
      await row(path).click();
      await page.locator('#detail .title', { hasText: path }).waitFor();
      return page.locator('#detail .section', { hasText: 'Request body' });
    };
    const form = await openBody('/form', Buffer.from('name=Ada+L&plan=pro'), [
      'Content-Type',
      'application/x-www-form-urlencoded',
    ]);
    expect(await form.locator('.pairs tr').allTextContents()).toEqual(['nameAda L', 'planpro']);

    const bad = await openBody('/bad-json', Buffer.from('{"a": 1,\n "b": }'), [
      'Content-Type',
      'application/json',
    ]);
    expect(await bad.locator('.json-error').textContent()).toMatch(/^Not valid JSON at line 2, column \d+/);
    expect(await bad.locator('.caret').textContent()).toContain('^ here');

    const bin = await openBody('/bin', Buffer.from([0, 1, 2, 0xff, 0x41]), [
      'Content-Type',
      'application/octet-stream',
    ]);
    expect(await bin.locator('pre.hex').textContent()).toBe(
      `00000000  ${'00 01 02 ff 41'.padEnd(47)}  ....A`,
    );

    const multipart = Buffer.from(
      '--XyZ\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n' +
        '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n' +
        'Content-Type: application/octet-stream\r\n\r\n\u0000\u0001\r\n--XyZ--\r\n',
      'latin1',
    );
    const parts = await openBody('/upload', multipart, ['Content-Type', 'multipart/form-data; boundary=XyZ']);
    expect(await parts.locator('.part').count()).toBe(2);
    expect(await parts.locator('.part').first().locator('pre').textContent()).toBe('hello');
    expect(await parts.locator('.part').last().locator('pre.hex').textContent()).toContain('00 01');

    const xml = await openBody('/xml', Buffer.from('<a><b>1</b><c/></a>'), [
      'Content-Type',
      'application/xml',
    ]);
    expect(await xml.locator('pre.xml').textContent()).toBe('<a>\n  <b>1</b>\n  <c/>\n</a>');

    const gz = await openBody('/gz', gzipSync('{"zipped":true}'), [
      'Content-Type',
      'application/json',
      'Content-Encoding',
      'gzip',
    ]);
    expect(await gz.locator('.body > p').first().textContent()).toContain('decoded from gzip');
    expect(await gz.locator('pre.json').textContent()).toBe('{\n  "zipped": true\n}');

    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
      'base64',
    );
    const image = await openBody('/img', png, ['Content-Type', 'image/png']);
    await expect
      .poll(() =>
        image.locator('img.inline-image').evaluate((img: { naturalWidth: number }) => img.naturalWidth),
      )
      .toBe(1);
  });

  it('pauses and resumes capture, and clears the list', async () => {
    await page.click('#pause');
    await page.locator('#pause', { hasText: 'Resume' }).waitFor();
    const status = async () =>
      (await (await fetch(`${stack.tunnel.inspectorUrl}/api/status`)).json()) as { paused: boolean };
    expect((await status()).paused).toBe(true);
    await page.click('#pause');
    await page.locator('#pause', { hasText: 'Pause' }).waitFor();
    expect((await status()).paused).toBe(false);
    await page.click('#clear');
    await expect.poll(() => rows().count()).toBe(0);
    await page.locator('#list-empty', { hasText: 'Send a request to' }).waitFor();
  });
});
