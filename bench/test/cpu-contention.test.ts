import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { meterMachine, meterThreads, readRunQueueWaitNs } from '../src/measure/cpu-contention.js';
import { meterSelf } from '../src/measure/process-stats.js';

// The machine figures a side records (S.machine) and a process's run-queue wait, read from this process
// and the real /proc: consistent with each other, whatever else the machine runs.

/** Keeps this thread on the CPU until it has used `ms` of CPU time. */
function spin(ms: number): void {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) return;
  }
}

/** /proc/stat and schedstat: Linux only. Elsewhere (macOS) the figures are null, as for a kernel without schedstat. */
const linux = process.platform === 'linux';

describe('machine load', () => {
  it.runIf(linux)(
    'counts this process’s own CPU in the machine’s busy CPU, with the load average at both ends',
    () => {
      const machine = meterMachine();
      const self = meterSelf();
      spin(300);
      const usage = self.stop();
      const load = machine.stop();
      expect(load.loadAverageBefore).toBeGreaterThanOrEqual(0);
      expect(load.loadAverageAfter).toBeGreaterThanOrEqual(0);
      // The machine was at least as busy as this process (10 ms ticks on both sides: a tick's slack each).
      expect(load.busyCpuPct).not.toBeNull();
      expect(load.busyCpuPct!).toBeGreaterThanOrEqual(usage.cpuPct * 0.8);
      // meterSelf records the same machine figures over its own interval.
      expect(usage.machine.busyCpuPct).not.toBeNull();
      expect(usage.runQueueWaitPct).not.toBeNull();
      expect(usage.runQueueWaitPct!).toBeGreaterThanOrEqual(0);
    },
  );

  it.runIf(linux)(
    'finds the busiest thread near a core while this one spins, and says nothing of a process that is gone',
    () => {
      const threads = meterThreads('self');
      spin(200);
      // This thread never slept: on a core, or waiting for one, all along (whatever else the machine runs).
      expect(threads.stop().busiestThreadPct!).toBeGreaterThan(90);
      expect(meterThreads(2 ** 22 + 1).stop()).toEqual({ runQueueWaitPct: null, busiestThreadPct: null });
    },
  );

  it.runIf(linux)('reads a run-queue wait that only grows, and none for a process that is gone', () => {
    const before = readRunQueueWaitNs(process.pid)!;
    spin(50);
    expect(readRunQueueWaitNs('self')!).toBeGreaterThanOrEqual(before);
    expect(readRunQueueWaitNs(2 ** 22 + 1)).toBeUndefined();
  });

  it('says nothing, rather than 0 %, of a process whose threads have no schedstat (a kernel without it)', () => {
    // A /proc that lists the threads but has no schedstat for them: CONFIG_SCHEDSTATS off, gVisor, WSL 1.
    const proc = mkdtempSync(join(tmpdir(), 'tunnel2-proc-'));
    try {
      mkdirSync(join(proc, '7', 'task', '7'), { recursive: true });
      mkdirSync(join(proc, '7', 'task', '8'), { recursive: true });
      expect(meterThreads(7, proc).stop()).toEqual({ runQueueWaitPct: null, busiestThreadPct: null });
      expect(readRunQueueWaitNs(7, proc)).toBeUndefined();
    } finally {
      rmSync(proc, { recursive: true, force: true });
    }
  });
});
