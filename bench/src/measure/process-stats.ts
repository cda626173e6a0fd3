import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { MachineLoad } from '../plan/report-schema.js';
import { meterMachine, meterThreads } from './cpu-contention.js';

/** What one process spent during one stage. */
export interface ProcessUsage {
  /** User + system CPU time, in ms (10 ms resolution: the kernel counts clock ticks). */
  cpuMs: number;
  /** cpuMs over the stage's wall time, in % of one core (200 % = two cores busy). */
  cpuPct: number;
  /** Largest resident set during the stage, in MiB (the whole process's lifetime if the reset failed). */
  peakRssMb: number;
  /** Time its threads were runnable but waited for a core, summed, in % of wall time; null where unknown. */
  runQueueWaitPct: number | null;
  /** Its busiest thread's time on a core or waiting for one, in % of wall time; null where unknown. */
  busiestThreadPct: number | null;
}

/** A running measurement of one process, started at the beginning of a stage. */
export interface UsageMeter {
  stop(): ProcessUsage | null;
}

/** The load generator's usage, with the machine around it over the same interval. */
export interface SelfUsage extends ProcessUsage {
  machine: MachineLoad;
}

// The unit of utime/stime in /proc/<pid>/stat. USER_HZ is 100 on every Linux ABI Node runs on.
const TICK_MS = 10;

/** utime + stime of a process in ms, or undefined where /proc is not there (macOS) or the process is gone. */
export function readCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the name, utime and stime are the 12th and 13th fields (fields 14 and 15 of the whole line).
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  return (utime + stime) * TICK_MS;
}

/**
 * utime + stime of a process and of its live child processes in ms (an edge with `--workers N` is a
 * primary and N children); undefined where /proc is not there or the process is gone.
 */
export function readTreeCpuMs(pid: number): number | undefined {
  const own = readCpuMs(pid);
  if (own === undefined) return undefined;
  let children = 0;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return own;
  }
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // After the command name: state, then the parent's pid.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent === pid) children += readCpuMs(Number(entry)) ?? 0;
  }
  return own + children;
}

/** A memory figure of a process from /proc/<pid>/status, in KiB; undefined off Linux or once it is gone. */
export function readStatusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of status.split('\n')) {
    if (line.startsWith(`${field}:`)) {
      const kb = Number.parseInt(line.slice(field.length + 1).trim(), 10);
      return Number.isFinite(kb) ? kb : undefined;
    }
  }
  return undefined;
}

/**
 * Writing 5 to clear_refs resets the peak-RSS counter (VmHWM) to the current RSS, so reading VmHWM at the
 * end of a stage gives that stage's peak exactly, with no sampling that could miss a short spike.
 */
function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Starts measuring a child process (Linux /proc); stop() answers null where that is not available. */
export function meterProcess(pid: number): UsageMeter {
  resetPeakRss(pid);
  // The children's too: a worker's CPU is the edge's (one that restarts mid-stage loses what it had used).
  const startCpu = readTreeCpuMs(pid);
  const threads = meterThreads(pid);
  const startedAt = performance.now();
  return {
    stop() {
      const endCpu = readTreeCpuMs(pid);
      const sched = threads.stop();
      const peakKb = readStatusKb(pid, 'VmHWM');
      if (startCpu === undefined || endCpu === undefined || peakKb === undefined) return null;
      const wallMs = performance.now() - startedAt;
      const cpuMs = endCpu - startCpu;
      return {
        cpuMs,
        cpuPct: wallMs > 0 ? (cpuMs / wallMs) * 100 : 0,
        peakRssMb: peakKb / 1024,
        ...sched,
      };
    },
  };
}

/**
 * Several processes doing one job (the agents serving one name as replicas, the backends behind them) as
 * one: their CPU and their peaks added up. Null when any of them cannot be read.
 */
export function meterProcesses(pids: readonly number[]): UsageMeter {
  const meters = pids.map((pid) => meterProcess(pid));
  return {
    stop() {
      const usages = meters.map((meter) => meter.stop());
      if (usages.some((usage) => usage === null)) return null;
      const sum = (field: 'cpuMs' | 'cpuPct' | 'peakRssMb') =>
        usages.reduce((total, usage) => total + (usage as ProcessUsage)[field], 0);
      // Several event loops: the most starved one says whether the job wanted more CPU than it got.
      const most = (field: 'runQueueWaitPct' | 'busiestThreadPct'): number | null => {
        const values = usages.map((usage) => (usage as ProcessUsage)[field]);
        return values.some((v) => v === null) ? null : Math.max(...(values as number[]));
      };
      return {
        cpuMs: sum('cpuMs'),
        cpuPct: sum('cpuPct'),
        peakRssMb: sum('peakRssMb'),
        runQueueWaitPct: most('runQueueWaitPct'),
        busiestThreadPct: most('busiestThreadPct'),
      };
    },
  };
}

/**
 * The same measurement for this process (the load generator), from Node's own counters, and the machine
 * around it over the same interval.
 */
export function meterSelf(): { stop(): SelfUsage } {
  const machine = meterMachine();
  const start = process.cpuUsage();
  const threads = meterThreads('self');
  const startedAt = performance.now();
  // The generator's RSS is reported as the current peak of the whole run: it is not the system under test.
  return {
    stop() {
      const used = process.cpuUsage(start);
      const wallMs = performance.now() - startedAt;
      const cpuMs = (used.user + used.system) / 1000;
      return {
        cpuMs,
        cpuPct: wallMs > 0 ? (cpuMs / wallMs) * 100 : 0,
        peakRssMb: process.resourceUsage().maxRSS / 1024,
        ...threads.stop(),
        machine: machine.stop(),
      };
    },
  };
}
