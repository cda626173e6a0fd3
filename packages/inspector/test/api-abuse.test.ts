import { createHash } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { createInspector, type Inspector } from '../src/inspector.js';
import { MAX_EXPENSIVE_READS } from '../src/server/work-gate.js';
import { fillStore } from './support/full-store.js';

const MiB = 1024 * 1024;

const open: Inspector[] = [];
afterEach(async () => {
  for (const inspector of open.splice(0)) await inspector.close();
});

/**
 * A store (1 MiB body limit) filled with `count` exchanges of 1 MiB: by default the 64 MiB budget and 60
 * entries of issue #29's report.
 */
async function fullInspector(count = 60, budget?: number): Promise<Inspector> {
  const inspector = await createInspector({
    target: { origin: 'http://127.0.0.1:9', basePath: '' },
    port: 0,
    budget,
  });
  open.push(inspector);
  fillStore(inspector, count);
  expect(inspector.store.count).toBe(count);
  return inspector;
}

interface Fetched {
  status: number;
  retryAfter: string | undefined;
  bytes: number;
  sha256: string;
}

/**
 * One GET read slowly: after each chunk the reader pauses until the loop's next turn, keeping only a hash
 * (the client shares the test's process: it must not hold what it reads either).
 */
function slowGet(url: string): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        bytes += chunk.length;
        res.pause();
        setImmediate(() => res.resume());
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: res.headers['retry-after'],
          bytes,
          sha256: hash.digest('hex'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * `clients` callers that all want the same answer at once: one refused as BUSY waits until another caller is
 * answered (an event, not a sleep), then asks again. Resolves with each caller's answer and how many 503s
 * were seen.
 */
async function crowd(url: string, clients: number): Promise<{ answers: Fetched[]; refused: number }> {
  const finished = new EventEmitter();
  finished.setMaxListeners(clients * 2);
  let refused = 0;
  const one = async (): Promise<Fetched> => {
    for (;;) {
      const next = once(finished, 'done');
      const answer = await slowGet(url);
      if (answer.status !== 503) {
        finished.emit('done');
        return answer;
      }
      expect(answer.retryAfter).toBe('1');
      refused++;
      await next;
    }
  };
  const answers = await Promise.all(Array.from({ length: clients }, one));
  return { answers, refused };
}

// A full collection on demand: what is measured is memory held, not garbage a collection has not reached yet.
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/**
 * The heap and Buffer memory the process holds: after two full collections (the first leaves freed Buffers'
 * memory counted until their finalizers ran).
 */
function held(): number {
  collect();
  collect();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/**
 * The most memory held while `work` runs, over what was held before: sampled every 100 ms, each sample after
 * a full collection (the samples only measure; nothing asserts on their timing).
 */
async function peakGrowth<T>(work: () => Promise<T>): Promise<{ result: T; growth: number }> {
  const before = held();
  let peak = before;
  const probe = setInterval(() => {
    peak = Math.max(peak, held());
  }, 100);
  try {
    const result = await work();
    peak = Math.max(peak, held());
    return { result, growth: peak - before };
  } finally {
    clearInterval(probe);
  }
}

/**
 * The event loop's longest hold while `work` runs: a 1 ms interval ticks on every turn of the loop that it
 * can, and between two ticks the main thread's own CPU time is what the loop spent on anything else (one
 * search's slice, the in-process clients' reading). Garbage collections are not the inspector's slices:
 * their time on the main thread (PerformanceObserver 'gc' entries) is taken out of the turn they fell in;
 * a mark-compact of the test process's heap once showed as a 66 ms turn. Wall-clock gaps are reported
 * too, but not asserted on: on a machine shared with other jobs, the process is also descheduled for tens
 * of ms while doing nothing.
 */
async function longestHold<T>(
  work: () => Promise<T>,
): Promise<{ result: T; holdMs: number; wallMs: number; gcMs: number }> {
  const turns: { from: number; to: number; cpuMs: number }[] = [];
  const collections: { at: number; ms: number }[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) collections.push({ at: entry.startTime, ms: entry.duration });
  });
  observer.observe({ entryTypes: ['gc'] });
  let wallMs = 0;
  let lastCpu = process.threadCpuUsage();
  let lastWall = performance.now();
  const probe = setInterval(() => {
    const cpu = process.threadCpuUsage(lastCpu);
    const now = performance.now();
    turns.push({ from: lastWall, to: now, cpuMs: (cpu.user + cpu.system) / 1000 });
    wallMs = Math.max(wallMs, now - lastWall);
    lastCpu = process.threadCpuUsage();
    lastWall = now;
  }, 1);
  try {
    const result = await work();
    clearInterval(probe);
    // The observer hears of collections after they ran: one turn of the loop for the last ones.
    await new Promise((resolve) => setImmediate(resolve));
    let holdMs = 0;
    let gcMs = 0;
    for (const turn of turns) {
      const gc = collections
        .filter((c) => c.at >= turn.from && c.at < turn.to)
        .reduce((sum, c) => sum + c.ms, 0);
      gcMs = Math.max(gcMs, gc);
      holdMs = Math.max(holdMs, turn.cpuMs - gc);
    }
    return { result, holdMs, wallMs, gcMs };
  } finally {
    clearInterval(probe);
    observer.disconnect();
  }
}

describe('the inspector under abuse of its expensive reads (issue #29, defect 4)', () => {
  it('16 concurrent slow HAR exports of a full store: memory stays within a constant, each export whole', async () => {
    // A 12 MiB store keeps the bytes moved (16 whole exports) small on a shared machine; the old code's
    // 16 whole HARs at once would still be ~200 MB here.
    const inspector = await fullInspector(10, 12 * MiB);
    const { result, growth } = await peakGrowth(() => crowd(`${inspector.url}/api/har`, 16));
    const { answers, refused } = result;
    // Every caller got the same, whole document; those beyond the gate's places waited their turn.
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200]));
    expect(new Set(answers.map((a) => a.sha256)).size).toBe(1);
    expect(answers[0]!.bytes).toBeGreaterThan(10 * MiB);
    expect(refused).toBeGreaterThan(0);
    // Each export used to build its whole HAR as one string (>80 MiB each: 2.26 GB for 16 in the agent).
    // Streamed, an export holds a slice and its socket's buffer: the growth is far below the store.
    console.info(`HAR x16: peak heap + buffers growth ${(growth / MiB).toFixed(1)} MiB`);
    expect(growth).toBeLessThan(16 * MiB);
  });

  it('a streamed HAR parses and carries every body byte for byte, slices cut anywhere', async () => {
    const inspector = await createInspector({
      target: { origin: 'http://127.0.0.1:9', basePath: '' },
      port: 0,
    });
    open.push(inspector);
    // Sizes around the slice length, two-byte characters throughout, one binary body in six.
    const bodies = fillStore(inspector, 12, 3 * 48 * 1024 + 1);
    const res = await fetch(`${inspector.url}/api/har`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(
      /^attachment; filename="tunnel2-tunnel-all-\d{8}-\d{6}\.har"$/,
    );
    type Content = { text: string; encoding?: string };
    const har = (await res.json()) as { log: { entries: { response: { content: Content } }[] } };
    expect(har.log.entries).toHaveLength(12);
    har.log.entries.forEach((entry, i) => {
      const { text, encoding } = entry.response.content;
      const bytes = encoding === 'base64' ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8');
      expect(bytes.equals(bodies[i]!), `entry ${i}`).toBe(true);
    });
  });

  it('exports that are never read hold little and give their place back when dropped', async () => {
    const inspector = await fullInspector(10, 12 * MiB);
    const { growth } = await peakGrowth(async () => {
      // A caller that asks and never reads: the export waits for 'drain', holding one slice.
      const sockets: Socket[] = [];
      for (let i = 0; i < MAX_EXPENSIVE_READS; i++) {
        const socket = connect(Number(new URL(inspector.url).port), '127.0.0.1');
        socket.pause();
        socket.write(`GET /api/har HTTP/1.1\r\nHost: ${new URL(inspector.url).host}\r\n\r\n`);
        sockets.push(socket);
      }
      // The places are taken: the next caller is refused, at once and cheaply.
      let answer = await slowGet(`${inspector.url}/api/har`);
      for (let tries = 0; answer.status !== 503 && tries < 100; tries++)
        answer = await slowGet(`${inspector.url}/api/har`);
      expect(answer.status).toBe(503);
      // The readers go away: their exports stop, and their places are free again.
      for (const socket of sockets) socket.destroy();
      await Promise.all(sockets.map((s) => once(s, 'close')));
      for (let tries = 0; answer.status === 503 && tries < 1000; tries++) {
        await new Promise((resolve) => setImmediate(resolve));
        answer = await slowGet(`${inspector.url}/api/status`);
        if (answer.status === 200) answer = await slowGet(`${inspector.url}/api/har`);
      }
      expect(answer.status).toBe(200);
    });
    console.info(`2 unread HAR exports: peak heap + buffers growth ${(growth / MiB).toFixed(1)} MiB`);
    expect(growth).toBeLessThan(16 * MiB);
  });

  it('8 concurrent body searches of a full store never stall the event loop for long', async () => {
    const inspector = await fullInspector();
    // No body holds the needle: each search reads all 60 MiB (about 190 ms of work each).
    const { result, holdMs, wallMs, gcMs } = await longestHold(() =>
      crowd(`${inspector.url}/api/entries?body=needle-nowhere&limit=1000`, 8),
    );
    expect(new Set(result.answers.map((a) => a.status))).toEqual(new Set([200]));
    console.info(
      `body search x8: longest loop hold ${holdMs.toFixed(1)} ms CPU (${wallMs.toFixed(0)} ms wall; longest GC in a turn ${gcMs.toFixed(1)} ms, not counted)`,
    );
    // It was ~190 ms per search, all in one turn of the loop; now slices of ~2 ms for all work together.
    // Generous: a garbage collection on the main thread shows here too.
    expect(holdMs).toBeLessThan(50);
  });

  it('a HAR export of a full store never stalls the event loop for long either', async () => {
    const inspector = await fullInspector();
    const { result, holdMs, wallMs, gcMs } = await longestHold(() => crowd(`${inspector.url}/api/har`, 3));
    expect(new Set(result.answers.map((a) => a.status))).toEqual(new Set([200]));
    console.info(
      `HAR x3: longest loop hold ${holdMs.toFixed(1)} ms CPU (${wallMs.toFixed(0)} ms wall; longest GC in a turn ${gcMs.toFixed(1)} ms, not counted)`,
    );
    expect(holdMs).toBeLessThan(50);
  });
});
