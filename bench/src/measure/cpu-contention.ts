import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { MachineLoad } from '../plan/report-schema.js';

// /proc/stat counts in USER_HZ clock ticks, 100 per second on every Linux ABI Node runs on.
const TICK_MS = 10;

/** Busy and total clock ticks of all cores since boot (/proc/stat), or undefined off Linux. */
function readCpuTicks(): { busy: number; total: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  const first = stat.slice(0, stat.indexOf('\n'));
  if (!first.startsWith('cpu ')) return undefined;
  const ticks = first.slice(4).trim().split(/\s+/).map(Number);
  if (ticks.length < 5 || ticks.some((n) => !Number.isFinite(n))) return undefined;
  // user nice system idle iowait irq softirq steal (guest time is already inside user): idle and iowait are not busy.
  const total = ticks.slice(0, 8).reduce((sum, n) => sum + n, 0);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return { busy: total - idle, total };
}

// Contention for CPU: how busy the machine was around a measurement, and how much a process's threads
// wanted a core and waited for one.

/**
 * The machine around a measurement: the 1-minute load average at both ends and how busy all cores were
 * in between. The load average moves slowly (it is a one-minute mean), so it says whether the machine was
 * busy before and after rather than during a short stage; the busy CPU says that, and ../verdict/ subtracts
 * the run's own processes from it to see what else ran.
 */
export function meterMachine(): { stop(): MachineLoad } {
  const before = loadavg()[0] ?? 0;
  const startTicks = readCpuTicks();
  const startedAt = performance.now();
  return {
    stop() {
      const endTicks = readCpuTicks();
      const wallMs = performance.now() - startedAt;
      const busyCpuPct =
        startTicks === undefined || endTicks === undefined || wallMs <= 0
          ? null
          : Math.round((((endTicks.busy - startTicks.busy) * TICK_MS) / wallMs) * 1000) / 10;
      return { loadAverageBefore: before, loadAverageAfter: loadavg()[0] ?? 0, busyCpuPct };
    },
  };
}

/**
 * On-CPU and run-queue nanoseconds of each thread of a process (`<proc>/<pid>/task/<tid>/schedstat`), or
 * undefined off Linux, once the process is gone, or when the kernel keeps no schedstat (CONFIG_SCHEDSTATS
 * off, gVisor, WSL 1): no thread read is no figure, not a thread that never ran.
 */
function readThreadTimes(
  pid: number | 'self',
  proc = '/proc',
): Map<string, { run: number; wait: number }> | undefined {
  let tasks: string[];
  try {
    tasks = readdirSync(`${proc}/${pid}/task`);
  } catch {
    return undefined;
  }
  const times = new Map<string, { run: number; wait: number }>();
  for (const tid of tasks) {
    try {
      const [run, wait] = readFileSync(`${proc}/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      if (Number.isFinite(run) && Number.isFinite(wait)) times.set(tid, { run: run!, wait: wait! });
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return times.size === 0 ? undefined : times;
}

/** Nanoseconds a process's threads spent waiting on a run queue, summed; undefined off Linux or once gone. */
export function readRunQueueWaitNs(pid: number | 'self', proc = '/proc'): number | undefined {
  const times = readThreadTimes(pid, proc);
  if (times === undefined) return undefined;
  let total = 0;
  for (const { wait } of times.values()) total += wait;
  return total;
}

/** What the scheduler says of a process's threads over a measurement, in % of its wall time. */
export interface ThreadContention {
  /** Run-queue wait summed over the threads: time they were ready to run but had no core. */
  runQueueWaitPct: number | null;
  /**
   * The busiest thread's time on a core or waiting for one. Near 100: a thread that never slept, that
   * wanted a core all along, whether it got one (busy) or not (starved: a shared core, a busy machine). An
   * event loop that is not saturated sleeps between its events, however long each wait for a core is.
   */
  busiestThreadPct: number | null;
}

/**
 * Starts measuring a process's threads (Linux schedstat): their run-queue wait and the busiest one. A
 * process on a core shared with a busy loop shows little CPU but a long wait: it wanted a core.
 */
export function meterThreads(pid: number | 'self', proc = '/proc'): { stop(): ThreadContention } {
  const start = readThreadTimes(pid, proc);
  const startedAt = performance.now();
  return {
    stop() {
      const end = readThreadTimes(pid, proc);
      const wallNs = (performance.now() - startedAt) * 1e6;
      if (start === undefined || end === undefined || wallNs <= 0) {
        return { runQueueWaitPct: null, busiestThreadPct: null };
      }
      let wait = 0;
      let busiest = 0;
      for (const [tid, now] of end) {
        // A thread started during the measurement counts from zero.
        const then = start.get(tid) ?? { run: 0, wait: 0 };
        wait += now.wait - then.wait;
        busiest = Math.max(busiest, now.run - then.run + (now.wait - then.wait));
      }
      return {
        runQueueWaitPct: (100 * wait) / wallNs,
        busiestThreadPct: Math.min(100, (100 * busiest) / wallNs),
      };
    },
  };
}
