// What a process promotes: a preload (`--import`) that samples the allocations which survived a scavenge
// (V8's sampling heap profiler with objects collected by minor GCs left out), from PROMOTED_HEAP_FROM to
// PROMOTED_HEAP_TO seconds after start, and writes the bytes by allocating function, with the collector's
// time in that window, to PROMOTED_HEAP_DIR/promoted-<pid>-<thread>.txt. Per-request objects that show up here outlived two
// scavenges: something kept them (issue #32: node:http2 keeps closed streams reachable until a full GC).
// PROMOTED_HEAP_ALL=1 keeps the objects minor GCs collected too: every allocation, not only what survived.
//   TUNNEL2_BENCH_NODE_OPTIONS="--import=$PWD/bench/scripts/promoted-heap.ts" node bench/scripts/grpc-unary-cost.ts grpc
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { PerformanceObserver } from 'node:perf_hooks';
import { threadId } from 'node:worker_threads';

interface SampleNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampleNode[];
}

const from = Number(process.env.PROMOTED_HEAP_FROM ?? 6) * 1000;
const to = Number(process.env.PROMOTED_HEAP_TO ?? 14) * 1000;
const dir = process.env.PROMOTED_HEAP_DIR ?? '/tmp';
const all = process.env.PROMOTED_HEAP_ALL === '1';
const session = new Session();
session.connect();
/** Collections in the window: scavenges (kind 1) and the rest (full, incremental steps). */
const gc = { on: false, minor: 0, minorMs: 0, other: 0, otherMs: 0 };
new PerformanceObserver((list) => {
  if (!gc.on) return;
  for (const entry of list.getEntries()) {
    const kind = (entry as { detail?: { kind?: number } }).detail?.kind;
    if (kind === 1) {
      gc.minor++;
      gc.minorMs += entry.duration;
    } else {
      gc.other++;
      gc.otherMs += entry.duration;
    }
  }
}).observe({ entryTypes: ['gc'] });

const where = (node: SampleNode): string => {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${url.replace(/^.*\/(packages|node_modules)\//, '$1/')}:${lineNumber + 1}`;
};

function summary(head: SampleNode): string {
  const self = new Map<string, number>();
  const ours = new Map<string, number>();
  let total = 0;
  const walk = (node: SampleNode, stack: readonly string[]): void => {
    const name = where(node);
    const path = [...stack, name];
    total += node.selfSize;
    self.set(name, (self.get(name) ?? 0) + node.selfSize);
    if (node.selfSize > 0) {
      for (const frame of new Set(path)) {
        if (frame.includes('packages/')) ours.set(frame, (ours.get(frame) ?? 0) + node.selfSize);
      }
    }
    for (const child of node.children) walk(child, path);
  };
  walk(head, []);
  const top = (map: Map<string, number>): string =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 20)
      .map(([name, bytes]) => `${(bytes / 1e3).toFixed(0).padStart(8)} KB  ${name}`)
      .join('\n');
  const collections = `scavenges ${gc.minor} (${gc.minorMs.toFixed(1)} ms), other ${gc.other} (${gc.otherMs.toFixed(1)} ms)`;
  return `${all ? 'allocated' : 'promoted'} in ${(to - from) / 1000} s: ${(total / 1e6).toFixed(2)} MB; ${collections}\n-- by allocating function\n${top(self)}\n-- our code, inclusive\n${top(ours)}\n`;
}

setTimeout(() => {
  gc.on = true;
  session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: all,
  });
  setTimeout(() => {
    gc.on = false;
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err !== null) return;
      const file = `${dir}/promoted-${process.pid}-${threadId}.txt`;
      writeFileSync(file, summary(result.profile.head as SampleNode));
    });
  }, to - from).unref();
}, from).unref();
