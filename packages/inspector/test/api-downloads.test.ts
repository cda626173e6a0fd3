import { afterEach, describe, expect, it } from 'vitest';
import { createInspector, type Inspector } from '../src/inspector.js';
import { harFileName, nameFromPublicUrl } from '../src/views/har-file-name.js';

const open: Inspector[] = [];
afterEach(async () => {
  for (const inspector of open.splice(0)) await inspector.close();
});

async function startInspector(): Promise<Inspector> {
  const inspector = await createInspector({
    target: { origin: 'http://127.0.0.1:9', basePath: '' },
    port: 0,
  });
  open.push(inspector);
  return inspector;
}

function record(inspector: Inspector, target: string): string {
  const r = inspector.capture.begin({ method: 'GET', target, headers: ['Host', 'x.example'] })!;
  r.responseHead(200, []);
  return r.finish()!;
}

/** The file name of a Content-Disposition: attachment; filename="…" (null when it has another form). */
function fileNameOf(res: Response): string | null {
  return /^attachment; filename="([^"]*)"$/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? null;
}

const STAMP = /(\d{8})-(\d{6})\.har$/;

/** The UTC `YYYYMMDD-HHMMSS` of a moment, to compare a file name's stamp with the time around the export. */
function stampOf(at: Date): string {
  return at.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
}

describe('HAR download names', () => {
  it('name the tunnel, the entry (or all) and the UTC time of the export, in safe characters only', async () => {
    const inspector = await startInspector();
    inspector.setPublicUrl('http://demo.localhost:8080/', 'demo');
    const id = record(inspector, '/one');
    record(inspector, '/two');
    const before = stampOf(new Date());
    const all = await fetch(`${inspector.url}/api/har`);
    const one = await fetch(`${inspector.url}/api/har?ids=${id}&redact=1`);
    const two = await fetch(`${inspector.url}/api/har?ids=1,2`);
    const after = stampOf(new Date());
    for (const res of [all, one, two]) {
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const names = [all, one, two].map(fileNameOf);
    expect(names[0]).toMatch(/^tunnel2-demo-all-\d{8}-\d{6}\.har$/);
    expect(names[1]).toMatch(new RegExp(`^tunnel2-demo-${id}-\\d{8}-\\d{6}\\.har$`));
    expect(names[2]).toMatch(/^tunnel2-demo-2-entries-\d{8}-\d{6}\.har$/);
    for (const name of names) {
      const stamp = STAMP.exec(name!)!;
      const at = `${stamp[1]}-${stamp[2]}`;
      expect(at >= before && at <= after, `${at} within ${before}..${after}`).toBe(true);
    }
  });

  it('read the name from the public URL when none was given, and say "tunnel" before any session', async () => {
    const inspector = await startInspector();
    const first = await fetch(`${inspector.url}/api/har`);
    await first.arrayBuffer();
    expect(fileNameOf(first)).toMatch(/^tunnel2-tunnel-all-/);
    expect(
      ((await (await fetch(`${inspector.url}/api/status`)).json()) as { name: unknown }).name,
    ).toBeNull();
    inspector.setPublicUrl('http://localhost:8080/session/my-app/');
    const second = await fetch(`${inspector.url}/api/har`);
    await second.arrayBuffer();
    expect(fileNameOf(second)).toMatch(/^tunnel2-my-app-all-/);
    expect(((await (await fetch(`${inspector.url}/api/status`)).json()) as { name: unknown }).name).toBe(
      'my-app',
    );
  });

  it('never carry a quote, a slash, a space or a leading dot, whatever the name', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    expect(harFileName('a"b/c d\r\n', ['../7'], at)).toBe('tunnel2-a_b_c_d__-_7-20260102-030405.har');
    expect(harFileName('..', undefined, at)).toBe('tunnel2-tunnel-all-20260102-030405.har');
    expect(harFileName('x'.repeat(300), [], at)).toBe(`tunnel2-${'x'.repeat(63)}-all-20260102-030405.har`);
    expect(nameFromPublicUrl('http://k3x9.tunnel.example.com/')).toBe('k3x9');
    expect(nameFromPublicUrl('http://127.0.0.1:8080/')).toBeNull();
    expect(nameFromPublicUrl(null)).toBeNull();
  });
});

describe('favicon', () => {
  it('is an SVG of the page folder, served as image/svg+xml under the page CSP, and named by the page', async () => {
    const inspector = await startInspector();
    const page = await (await fetch(`${inspector.url}/`)).text();
    expect(page).toContain('<link rel="icon" href="favicon.svg" type="image/svg+xml">');
    for (const path of ['/favicon.svg', '/favicon.ico']) {
      const res = await fetch(`${inspector.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/svg+xml');
      // img-src 'self' lets the page show it; nothing is fetched from elsewhere.
      expect(res.headers.get('content-security-policy')).toContain("img-src 'self'");
      const svg = await res.text();
      expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
      expect(svg).not.toMatch(/href|url\(|<script/i);
    }
  });
});
