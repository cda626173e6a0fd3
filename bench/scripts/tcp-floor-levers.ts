// The kernel-level levers of the TCP floor (relay-floor-process.ts), A/B in one run: one backend, one relay
// pair per lever set (all started at once, idle when not measured), and transfers alternated lever set by
// lever set, round by round, so the machine's drift falls on every set alike.
//   node bench/scripts/tcp-floor-levers.ts [rounds=5] [MiB=256] ['<name>=<relay flags>' ...]
// Prints each transfer (MB/s, edge + agent CPU ms from /proc, peak RSS) and per set the medians. Build first.

import { bulkDownload, bulkUpload } from '../dist/measure/bulk-client.js';
import { readCpuMs, readStatusKb } from '../dist/measure/process-stats.js';
import { startRelay } from '../dist/scenarios/floor-scenario.js';
import { startBackendService, targetOf } from '../dist/stacks/bench-stack.js';
import type { ChildService } from '../dist/stacks/child-service.js';

const [roundsArg, mibArg, ...setArgs] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 5);
const bytes = Number(mibArg ?? 256) * 2 ** 20;
const sets = (
  setArgs.length > 0
    ? setArgs
    : [
        'default=',
        'nodelay-off=--no-delay off',
        'hwm-1m=--high-water-mark 1048576',
        'coalesce-256k=--coalesce 262144 --high-water-mark 1048576',
        'read-256k=--read-bytes 262144 --high-water-mark 1048576',
      ]
).map((arg) => {
  const at = arg.indexOf('=');
  return {
    name: arg.slice(0, at),
    flags: arg
      .slice(at + 1)
      .split(' ')
      .filter(Boolean),
  };
});
const chunk = Buffer.alloc(256 * 1024, 0x5a);

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const started: ChildService[] = [];
try {
  const backend = await startBackendService();
  started.push(backend);
  const relays = [];
  for (const set of sets) relays.push({ set, ...(await startRelay(backend.readyValue, started, set.flags)) });
  const results = new Map<string, { mbps: number[]; cpuMs: number[]; peakMb: number[] }>();
  for (let round = 0; round <= rounds; round++) {
    for (const direction of ['download', 'upload'] as const) {
      for (const relay of relays) {
        const target = { ...targetOf(relay.edge.readyValue), host: 'bench' };
        const pids = [relay.edge.pid, relay.agent.pid];
        const cpu0 = pids.map((pid) => readCpuMs(pid) ?? Number.NaN);
        const rssMb = (): number => Math.max(...pids.map((pid) => (readStatusKb(pid, 'VmRSS') ?? 0) / 1024));
        const startMb = rssMb();
        let peakMb = startMb;
        const timer = setInterval(() => {
          peakMb = Math.max(peakMb, rssMb());
        }, 100);
        const t0 = performance.now();
        const moved =
          direction === 'download'
            ? await bulkDownload(target, bytes)
            : await bulkUpload(target, bytes, chunk);
        const seconds = (performance.now() - t0) / 1000;
        clearInterval(timer);
        const cpuMs = pids.reduce((sum, pid, i) => sum + ((readCpuMs(pid) ?? Number.NaN) - cpu0[i]!), 0);
        if (moved !== bytes) throw new Error(`${relay.set.name} ${direction}: ${moved} of ${bytes} bytes`);
        // Round 0 warms every set up and is not counted.
        if (round === 0) continue;
        const key = `${direction} ${relay.set.name}`;
        const entry = results.get(key) ?? { mbps: [], cpuMs: [], peakMb: [] };
        entry.mbps.push(bytes / seconds / 1e6);
        entry.cpuMs.push(cpuMs);
        entry.peakMb.push(peakMb);
        results.set(key, entry);
        console.log(
          `round ${round} ${key}: ${(bytes / seconds / 1e6).toFixed(0)} MB/s, edge + agent ${cpuMs.toFixed(0)} ms CPU, RSS (larger of edge, agent) ${startMb.toFixed(0)} → ${peakMb.toFixed(0)} MB`,
        );
      }
    }
  }
  console.log(`\nmedians over ${rounds} rounds, ${bytes / 2 ** 20} MiB each (edge + agent CPU per GiB):`);
  for (const [key, r] of results) {
    const perGiB = median(r.cpuMs) * (2 ** 30 / bytes);
    console.log(
      `${key.padEnd(28)} ${median(r.mbps).toFixed(0).padStart(5)} MB/s  ${perGiB.toFixed(0).padStart(5)} ms CPU/GiB  peak RSS ${Math.max(...r.peakMb).toFixed(0)} MB`,
    );
  }
} finally {
  for (const service of started.reverse()) await service.stop();
}
