// Where an edge's or an agent's memory is, over a bench run: a preload for both processes,
//   TUNNEL2_BENCH_NODE_OPTIONS="--import ./bench/scripts/memory-sampler.mjs" SAMPLER_DIR=/tmp/samples \
//     node bench/dist/main.js max --only tunnel --connections 100 --duration 10 --warmup 3
// A preload runs in every thread that loads modules (the agent's worker too): each writes a JSON line every
// SAMPLER_MS (200) to $SAMPLER_DIR/<edge|agent>-<pid>-<main|w<thread id>>.jsonl with process.memoryUsage(),
// v8.getHeapSpaceStatistics() (size and used per space, kB of 10^3 bytes), its full and young collections
// so far and the heap's size after each full one (its live size); the main thread adds /proc/self/status
// (KiB) and, every SAMPLER_SMAPS_EVERY-th sample, the anonymous memory of /proc/self/smaps by kind: glibc's
// main arena ([heap]), 64 MiB-aligned mappings (its thread arenas) and the rest (V8's pages, stacks).
// bench/scripts/memory-samples-peak.ts reads them at each process's peak VmRSS (bench/README.md, "Issue #34:
// the agent's peak memory"). Plain JavaScript, unlike the other scripts: a TypeScript preload makes Node load
// its type stripper into every thread it measures (8-9 MB more of large objects in the agent's two heaps).
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const ARENA_ALIGN = 64 * 1024 * 1024;
const dir = process.env.SAMPLER_DIR ?? '/tmp/tunnel2-memory-samples';
const argv = process.argv.slice(2);
const role = argv.includes('server') ? 'edge' : argv.includes('http') ? 'agent' : undefined;

const kB = (bytes) => Math.round(bytes / 1e3);

function status() {
  /** @type {Record<string, number>} */
  const out = {};
  for (const line of readFileSync('/proc/self/status', 'utf8').split('\n')) {
    const match = /^(VmRSS|VmHWM|RssAnon|RssFile|Threads):\s+(\d+)/.exec(line);
    if (match) out[match[1]] = Number(match[2]);
  }
  return out;
}

function smaps() {
  const sum = { heap: 0, arenas: 0, otherAnon: 0, file: 0 };
  /** @type {keyof typeof sum} */
  let kind = 'file';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const anonymous = head[2] === '0' && head[3] === '';
      if (head[3] === '[heap]') kind = 'heap';
      else if (!anonymous) kind = 'file';
      else kind = Number.parseInt(head[1], 16) % ARENA_ALIGN === 0 ? 'arenas' : 'otherAnon';
    } else if (line.startsWith('Rss:')) sum[kind] += Number.parseInt(line.slice(4), 10);
  }
  return sum;
}

if (role !== undefined) {
  mkdirSync(dir, { recursive: true });
  const file = `${dir}/${role}-${process.pid}-${isMainThread ? 'main' : `w${threadId}`}.jsonl`;
  const periodMs = Number(process.env.SAMPLER_MS ?? 200);
  const smapsEvery = Number(process.env.SAMPLER_SMAPS_EVERY ?? 0);
  const gcs = { major: 0, majorMs: 0, minor: 0, minorMs: 0 };
  /** @type {number[]} */
  let liveAfterMajor = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = entry.detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        gcs.major++;
        gcs.majorMs += entry.duration;
        liveAfterMajor.push(kB(getHeapStatistics().used_heap_size));
      } else if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        gcs.minor++;
        gcs.minorMs += entry.duration;
      }
    }
  }).observe({ entryTypes: ['gc'] });
  let samples = 0;
  setInterval(() => {
    samples++;
    const usage = process.memoryUsage();
    /** @type {Record<string, [number, number]>} */
    const spaces = {};
    for (const space of getHeapSpaceStatistics()) {
      spaces[space.space_name.replace(/_space$/, '')] = [kB(space.space_size), kB(space.space_used_size)];
    }
    /** @type {Record<string, unknown>} */
    const row = {
      t: Date.now(),
      heapTotal: kB(usage.heapTotal),
      heapUsed: kB(usage.heapUsed),
      external: kB(usage.external),
      arrayBuffers: kB(usage.arrayBuffers),
      spaces,
      majors: gcs.major,
      majorMs: Math.round(gcs.majorMs),
      minors: gcs.minor,
      minorMs: Math.round(gcs.minorMs),
      liveAfterMajor,
    };
    liveAfterMajor = [];
    if (isMainThread) {
      row.status = status();
      if (smapsEvery > 0 && samples % smapsEvery === 0) row.smaps = smaps();
    }
    appendFileSync(file, `${JSON.stringify(row)}\n`);
  }, periodMs).unref();
}
