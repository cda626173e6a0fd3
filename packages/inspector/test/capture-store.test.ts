import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createCapture } from '../src/capture/capture.js';
import { EntryStore } from '../src/capture/entry-store.js';
import { matches, parseFilter, SEARCH_SLICE_BYTES, searchWindows } from '../src/views/entry-filter.js';
import { toEntry, toSummary } from '../src/views/entry-view.js';

function record(store: EntryStore, bodyLimit: number, body: Buffer, headers: string[] = []) {
  const recorder = createCapture(store, bodyLimit).begin({ method: 'POST', target: '/x?y=1', headers });
  recorder?.requestData(body);
  recorder?.responseHead(200, ['content-type', 'text/plain']);
  recorder?.responseData(Buffer.from('ok'));
  const id = recorder?.finish();
  return id === undefined ? undefined : store.get(id);
}

describe('capture limits', () => {
  it('keeps a body up to the limit and says "truncated at N of M"', () => {
    const store = new EntryStore();
    const recorder = createCapture(store, 10).begin({ method: 'POST', target: '/', headers: [] })!;
    recorder.requestData(Buffer.from('0123456'));
    recorder.requestData(Buffer.from('789abcdef'));
    recorder.requestData(Buffer.from('more'));
    const entry = store.get(recorder.finish()!)!;
    const body = toEntry(entry).requestBody;
    expect(body).toMatchObject({ size: 20, captured: 10, truncated: true });
    expect(Buffer.from(body.base64, 'base64').toString()).toBe('0123456789');
  });

  it('copies chunks (a reused buffer does not change what was captured)', () => {
    const store = new EntryStore();
    const chunk = Buffer.from('abc');
    const entry = record(store, 100, chunk)!;
    chunk.write('zzz');
    expect(entry.request.bytes().toString()).toBe('abc');
  });

  it('a limit of 0 keeps no bytes but counts them', () => {
    const entry = record(new EntryStore(), 0, Buffer.alloc(500))!;
    expect(toEntry(entry).requestBody).toMatchObject({ size: 500, captured: 0, truncated: true, base64: '' });
  });

  it('paused: nothing is recorded; resumed: again', () => {
    const store = new EntryStore();
    const events: boolean[] = [];
    store.on('status', (s) => events.push(s.paused));
    store.setPaused(true);
    expect(record(store, 100, Buffer.from('a'))).toBeUndefined();
    expect(store.count).toBe(0);
    store.setPaused(false);
    expect(record(store, 100, Buffer.from('a'))).toBeDefined();
    expect(store.count).toBe(1);
    expect(events).toEqual([true, false]);
  });

  it('takes the error code from x-tunnel2-error and the client from X-Forwarded-For', () => {
    const store = new EntryStore();
    const r = createCapture(store, 100).begin({
      method: 'GET',
      target: '/',
      headers: ['X-Forwarded-For', '203.0.113.9, 10.0.0.1'],
    })!;
    r.responseHead(502, ['x-tunnel2-error', 'TUNNEL2_ERR_BACKEND_UNREACHABLE']);
    const entry = store.get(r.finish()!)!;
    expect(entry.error?.code).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
    expect(toSummary(entry).clientAddress).toBe('203.0.113.9');
  });
});

describe('entry store', () => {
  it('evicts the oldest first at the count cap', () => {
    const store = new EntryStore({ maxEntries: 3 });
    for (let i = 0; i < 5; i++) record(store, 100, Buffer.from(String(i)));
    expect([...store.newestFirst()].map((e) => e.id)).toEqual(['5', '4', '3']);
    expect(store.count).toBe(3);
  });

  it('stays within the byte budget, oldest evicted first; an entry larger than the budget is not kept', () => {
    const store = new EntryStore({ budgetBytes: 50_000 });
    for (let i = 0; i < 20; i++) record(store, 20_000, Buffer.alloc(10_000, i));
    expect(store.bytes).toBeLessThanOrEqual(50_000);
    expect(store.count).toBe(4);
    expect(store.get('20')).toBeDefined();
    expect(store.get('16')).toBeUndefined();
    // A body larger than the whole budget is counted, not copied (it never held the budget), and nothing
    // is evicted for it: its entry is kept, marked truncated at 0 bytes.
    const big = record(store, 100_000, Buffer.alloc(60_000))!;
    expect(big.id).toBe('21');
    expect(toEntry(big).requestBody).toMatchObject({ size: 60_000, captured: 0, truncated: true });
    expect(store.get('17')).toBeDefined();
    expect(store.count).toBe(5);
    expect(store.bytes).toBeLessThanOrEqual(50_000);
  });

  it("counts a response's trailers against the budget: a set larger than it is not kept", () => {
    const store = new EntryStore({ budgetBytes: 50_000 });
    for (let i = 0; i < 3; i++) record(store, 20_000, Buffer.alloc(10_000, i));
    // A hostile backend's trailer set larger than the whole budget: numbered, not kept, nothing evicted.
    const recorder = createCapture(store, 1_000).begin({ method: 'POST', target: '/', headers: [] })!;
    recorder.responseHead(200, []);
    recorder.responseTrailers(['x-big', 'v'.repeat(60_000)]);
    const id = recorder.finish()!;
    expect(store.get(id)).toBeUndefined();
    expect(store.count).toBe(3);
    expect(store.bytes).toBeLessThanOrEqual(50_000);
    // Trailers that fit are kept, and their characters are charged.
    const before = store.bytes;
    const small = createCapture(store, 1_000).begin({ method: 'POST', target: '/', headers: [] })!;
    small.responseHead(200, []);
    small.responseTrailers(['grpc-status', '0', 'x-pad', 'p'.repeat(5_000)]);
    const kept = store.get(small.finish()!)!;
    expect(kept.responseTrailers).toContain('grpc-status');
    expect(store.bytes - before).toBeGreaterThan(5_000);
    // Each field is a string of its own, not bytes in the arena: its overhead is charged too, or 128 short
    // pairs (what node:http2 lets a backend send) would cost the budget almost nothing.
    const many = createCapture(store, 1_000).begin({ method: 'POST', target: '/', headers: [] })!;
    many.responseHead(200, []);
    many.responseTrailers(Array.from({ length: 256 }, () => 'x'));
    const beforeMany = store.bytes;
    many.finish();
    expect(store.bytes - beforeMany).toBeGreaterThan(256 * 16);
  });

  it('counts bodies still being captured against the budget: concurrent exchanges cannot exceed it', () => {
    const store = new EntryStore({ budgetBytes: 100_000 });
    const capture = createCapture(store, 50_000);
    const open = Array.from(
      { length: 20 },
      (_, i) => capture.begin({ method: 'POST', target: `/${i}`, headers: [] })!,
    );
    for (let round = 0; round < 3; round++) {
      for (const recorder of open) {
        recorder.requestData(Buffer.alloc(10_000, round));
        expect(store.bytes).toBeLessThanOrEqual(100_000);
      }
    }
    const entries = open.map((recorder) => store.get(recorder.finish()!)!);
    const kept = entries.reduce((sum, e) => sum + e.request.captured, 0);
    expect(kept).toBeLessThanOrEqual(100_000);
    expect(entries.every((e) => e.request.size === 30_000)).toBe(true);
    expect(entries.filter((e) => e.request.truncated).length).toBeGreaterThan(0);
    // What a truncated body kept is a prefix: once refused, a body copies nothing more.
    const sent = Buffer.concat([0, 1, 2].map((round) => Buffer.alloc(10_000, round)));
    for (const e of entries)
      expect(e.request.bytes().equals(sent.subarray(0, e.request.captured))).toBe(true);
    expect(store.bytes).toBeLessThanOrEqual(100_000);
    store.clear();
    expect(store.bytes).toBe(0);
  });

  it('cached decodings give way to a new capture: it evicts and drops them before it is refused', () => {
    const store = new EntryStore({ budgetBytes: 1_000_000 });
    const capture = createCapture(store, 400_000);
    const stored = [];
    for (let i = 0; i < 4; i++) {
      const r = capture.begin({ method: 'GET', target: `/${i}`, headers: [] })!;
      r.responseHead(200, ['content-encoding', 'gzip']);
      r.responseData(gzipSync(Buffer.alloc(200_000, 97 + i)));
      stored.push(r.finish()!);
    }
    // Read as the page or a body search would: the four decodings (800 kB) are cached.
    for (const id of stored) expect(toEntry(store.get(id)!).responseBody.decodedBase64).toBeDefined();
    expect(store.bytes).toBeGreaterThan(800_000);
    const post = record(store, 400_000, Buffer.alloc(300_000, 'p'))!;
    expect(post.request).toMatchObject({ size: 300_000, captured: 300_000 });
    expect(store.bytes).toBeLessThanOrEqual(1_000_000);
    // Only a cache was dropped: the entries are all still there, and decode again when read.
    for (const id of stored) expect(toEntry(store.get(id)!).responseBody.decodedBase64).toBeDefined();
    expect(store.bytes).toBeLessThanOrEqual(1_000_000);
  });

  it('refuses a capture only when the captures running alone would exceed the budget', () => {
    const store = new EntryStore({ budgetBytes: 100_000 });
    const capture = createCapture(store, 100_000);
    for (let i = 0; i < 5; i++) record(store, 100_000, Buffer.alloc(15_000, i));
    const a = capture.begin({ method: 'POST', target: '/a', headers: [] })!;
    const b = capture.begin({ method: 'POST', target: '/b', headers: [] })!;
    a.requestData(Buffer.alloc(60_000, 'a'));
    b.requestData(Buffer.alloc(60_000, 'b'));
    // The oldest entries were evicted for a's 60 kB; b's would exceed the budget with a's alone: refused.
    expect(store.count).toBe(2);
    expect(store.get(a.finish()!)!.request.captured).toBe(60_000);
    expect(store.get(b.finish()!)!.request.captured).toBe(0);
    expect(store.bytes).toBeLessThanOrEqual(100_000);
  });

  it('numbers entries when they are stored: ids follow the list order when exchanges finish out of order', () => {
    const store = new EntryStore();
    const capture = createCapture(store, 100);
    const slow = capture.begin({ method: 'GET', target: '/slow', headers: [] })!;
    const fast = capture.begin({ method: 'GET', target: '/fast', headers: [] })!;
    fast.finish();
    slow.finish();
    const listed = [...store.newestFirst()].map((e) => [e.target, e.id]);
    expect(listed).toEqual([
      ['/slow', '2'],
      ['/fast', '1'],
    ]);
  });

  it('clear empties it and says so', () => {
    const store = new EntryStore();
    let cleared = 0;
    store.on('clear', () => cleared++);
    record(store, 100, Buffer.from('a'));
    store.clear();
    expect(store.count).toBe(0);
    expect(store.bytes).toBe(0);
    expect(cleared).toBe(1);
  });
});

describe('reused exchange slots', () => {
  it('an exchange recorded in a reused slot keeps nothing of the one before', () => {
    const store = new EntryStore();
    const capture = createCapture(store, 100_000);
    const first = capture.begin({ method: 'POST', target: '/first', headers: ['x-long', 'a'.repeat(3000)] })!;
    first.requestData(Buffer.alloc(10_000, 'a'));
    first.responseHead(500, ['x-tunnel2-error', 'TUNNEL2_ERR_X', 'x-more', 'b'.repeat(2000)]);
    first.responseData(Buffer.from('first response'));
    const firstId = first.finish()!;
    const second = capture.begin({ method: 'GET', target: '/second', headers: ['accept', '*/*'] })!;
    second.responseData(Buffer.from('hi'));
    const entry = toEntry(store.get(second.finish()!)!);
    expect(entry).toMatchObject({ method: 'GET', path: '/second', status: 0, responseHeaders: [] });
    expect(entry.requestHeaders).toEqual([['accept', '*/*']]);
    expect(entry.requestBody).toMatchObject({ size: 0, captured: 0 });
    expect(Buffer.from(entry.responseBody.base64, 'base64').toString()).toBe('hi');
    expect(entry.error).toBeUndefined();
    expect(entry.ttfbMs).toBeNull();
    // The first is intact in the arena.
    const kept = toEntry(store.get(firstId)!);
    expect(kept.requestBody).toMatchObject({ size: 10_000, captured: 10_000 });
    expect(kept.error?.code).toBe('TUNNEL2_ERR_X');
    // Only the stored entries hold the budget: nothing is left reserved by the exchanges.
    store.clear();
    expect(store.bytes).toBe(0);
  });

  it('a recorder used after its finish changes nothing (its slot may hold another exchange by then)', () => {
    const store = new EntryStore();
    const capture = createCapture(store, 100);
    const done = capture.begin({ method: 'POST', target: '/done', headers: [] })!;
    const doneId = done.finish()!;
    const running = capture.begin({ method: 'POST', target: '/running', headers: [] })!;
    done.requestData(Buffer.from('stale'));
    done.responseHead(418, []);
    done.tunnelData('in', Buffer.from('stale'));
    expect(done.finish()).toBeUndefined();
    running.requestData(Buffer.from('fresh'));
    const entry = toEntry(store.get(running.finish()!)!);
    expect(entry).toMatchObject({ path: '/running', status: 0 });
    expect(Buffer.from(entry.requestBody.base64, 'base64').toString()).toBe('fresh');
    expect(store.count).toBe(2);
    expect(store.get(doneId)).toBeDefined();
  });
});

describe('filters', () => {
  it('finds text inside a gzip-encoded body, case-insensitively', async () => {
    const store = new EntryStore();
    const entry = record(store, 1 << 20, gzipSync('{"event":"Invoice.Paid"}'), ['Content-Encoding', 'gzip'])!;
    expect(await matches(entry, parseFilter(new URLSearchParams('body=invoice.paid')))).toBe(true);
    expect(await matches(entry, parseFilter(new URLSearchParams('body=refund')))).toBe(false);
    expect(toEntry(entry).requestBody.decodedBase64).toBe(
      Buffer.from('{"event":"Invoice.Paid"}').toString('base64'),
    );
  });

  it('decodes only within the body limit, never a truncated body, and charges a kept decoding to the budget', async () => {
    const store = new EntryStore({ budgetBytes: 1 << 20 });
    const plain = Buffer.from('x'.repeat(5_000));
    const small = record(store, 10_000, gzipSync(plain), ['Content-Encoding', 'gzip'])!;
    const before = store.bytes;
    expect(Buffer.from(toEntry(small).requestBody.decodedBase64!, 'base64').equals(plain)).toBe(true);
    expect(store.bytes).toBe(before + plain.length);
    toEntry(small);
    expect(store.bytes).toBe(before + plain.length); // decoded once, kept

    // 20,000 bytes once decoded, over the 10,000-byte limit: not decoded, searched as captured.
    const bomb = record(store, 10_000, gzipSync(`needle${'y'.repeat(20_000)}`), [
      'Content-Encoding',
      'gzip',
    ])!;
    expect(bomb.request.truncated).toBe(false);
    expect(toEntry(bomb).requestBody.decodedBase64).toBeUndefined();
    expect(await matches(bomb, parseFilter(new URLSearchParams('body=needle')))).toBe(false);

    const cut = record(store, 10, gzipSync(plain), ['Content-Encoding', 'gzip'])!;
    expect(cut.request.truncated).toBe(true);
    expect(toEntry(cut).requestBody.decodedBase64).toBeUndefined();

    store.clear();
    expect(store.bytes).toBe(0);
  });

  it('method, status class or code, path and header', async () => {
    const entry = record(new EntryStore(), 100, Buffer.from(''), ['X-Hook', 'Stripe'])!;
    const f = (q: string) => matches(entry, parseFilter(new URLSearchParams(q)));
    expect(await f('method=post')).toBe(true);
    expect(await f('method=GET')).toBe(false);
    expect(await f('status=2xx')).toBe(true);
    expect(await f('status=404')).toBe(false);
    expect(await f('path=Y=1')).toBe(true);
    expect(await f('header=x-hook:strip')).toBe(true);
    expect(await f('header=x-hook:github')).toBe(false);
    expect(() => parseFilter(new URLSearchParams('status=abc'))).toThrow(/status/);
  });

  it('finds a match across the windows a body is read in, multi-byte characters and all', async () => {
    const store = new EntryStore();
    // 'é' is two bytes: windows cut at any byte offset around the match must still find it.
    for (const before of [
      SEARCH_SLICE_BYTES - 3,
      SEARCH_SLICE_BYTES - 1,
      SEARCH_SLICE_BYTES,
      2 * SEARCH_SLICE_BYTES + 1,
    ]) {
      const text = `${'é'.repeat(Math.floor(before / 2))}${before % 2 === 1 ? 'a' : ''}Needle-ÉTÉ${'z'.repeat(1000)}`;
      const entry = record(store, 1 << 20, Buffer.from(text), [])!;
      expect(await matches(entry, parseFilter(new URLSearchParams('body=needle-été'))), String(before)).toBe(
        true,
      );
      expect(await matches(entry, parseFilter(new URLSearchParams('body=needle-ete'))), String(before)).toBe(
        false,
      );
    }
  });

  it('reads a body that is not UTF-8 once, window by window (a run of continuation bytes)', async () => {
    // Anyone who can reach the tunnel can send such a body: 0x80 bytes, then a match in the last window.
    const body = Buffer.concat([Buffer.alloc(4 * SEARCH_SLICE_BYTES, 0x80), Buffer.from('needle')]);
    const entry = record(new EntryStore(), 1 << 20, body, [])!;
    expect(await matches(entry, parseFilter(new URLSearchParams('body=needle')))).toBe(true);
    // Each window decodes about its own 64 KiB: the unbounded walk back to a character's start took every
    // window back to the run's start and on to the body's end (quadratic: 178 ms for 1 MiB, 12 ms steps).
    const windows = searchWindows(body, 'needle'.length);
    expect(windows).toHaveLength(5);
    for (const [from, to] of windows) expect(to - from).toBeLessThanOrEqual(SEARCH_SLICE_BYTES + 4 * 7 + 4);
    expect(windows.at(-1)?.[1]).toBe(body.length);
  });
});
