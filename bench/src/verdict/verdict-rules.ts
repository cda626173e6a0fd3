import type { ProcessUsageReport, VerdictRules } from '../plan/report-schema.js';

/**
 * The thresholds of the verdict, written into every report beside it (verdict.rules).
 *
 * 99 % and 99.9 % are the issue's (#35) and k6's usual thresholds. The p99 factor is 5 with a 25 ms floor:
 * on a shared machine a p99 of 2 ms at the first stage reads 6–15 ms at a later one without anything
 * saturating (a GC pause, a neighbour's burst), while a saturated side's corrected p99 grows without bound
 * (the queue grows every second), so 5× and 25 ms miss no real bend and call no noise one. 90 % of a core:
 * a saturated Node.js event loop's thread is on a core or waiting for one just under 100 % of the time. The generator is
 * judged by that alone, not by its event-loop delay: on a busy machine the delay passes 50 ms while the
 * generator still keeps its schedule (the run's other side, measured right after, shows it).
 */
export const VERDICT_RULES: VerdictRules = {
  heldRatePct: 99,
  minSuccessPct: 99.9,
  p99Factor: 5,
  p99FloorMs: 25,
  nearCorePct: 90,
  busyOtherCpuPct: 25,
};

/**
 * What a process asked of the CPU, in % of one core: its busiest thread's time on a core or waiting for
 * one (100: a thread that never slept), or its CPU if higher (several busy threads); in reports without
 * the thread figure, CPU + run-queue wait.
 */
export function demandPct(usage: ProcessUsageReport | null | undefined): number | null {
  if (usage === null || usage === undefined) return null;
  const busiest = usage.busiestThreadPct;
  if (busiest !== null && busiest !== undefined) return Math.max(busiest, usage.cpuPct);
  return usage.cpuPct + (usage.runQueueWaitPct ?? 0);
}

/**
 * "CPU 4 %, run-queue wait 95 %, busiest thread 99 % of a core" (each where measured), and when the wait
 * is larger than the CPU, that the process was starved rather than busy: other work held its core.
 */
export function demandText(usage: ProcessUsageReport): string {
  const parts = [`CPU ${usage.cpuPct.toFixed(0)} %`];
  const wait = usage.runQueueWaitPct;
  if (wait !== null && wait !== undefined) parts.push(`run-queue wait ${wait.toFixed(0)} %`);
  const busiest = usage.busiestThreadPct;
  if (busiest !== null && busiest !== undefined) parts.push(`busiest thread ${busiest.toFixed(0)} %`);
  const starved = wait != null && wait > usage.cpuPct ? ', mostly waiting for a core other work held' : '';
  return `${parts.join(', ')} of a core${starved}`;
}
