import { readFileSync } from 'node:fs';
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
