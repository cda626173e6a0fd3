import type { ProcessUsageReport, VerdictRules } from '../plan/report-schema.js';

/**
 * The thresholds of the verdict, written into every report beside it (verdict.rules).
 *
 * 99 % and 99.9 % are the issue's (#35) and k6's usual thresholds. The p99 factor is 5 with a 25 ms floor:
 * on a shared machine a p99 of 2 ms at the first stage reads 6–15 ms at a later one without anything
 * saturating (a GC pause, a neighbour's burst), while a saturated side's corrected p99 grows without bound
 * (the queue grows every second), so 5× and 25 ms miss no real bend and call no noise one. 90 % of a core:
 * a Node.js event loop that wants a core shows CPU + run-queue wait just under 100 %. The generator is
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

/** What a process asked of the CPU: what it got plus what its event loop waited for, in % of one core. */
export function demandPct(usage: ProcessUsageReport | null | undefined): number | null {
  if (usage === null || usage === undefined) return null;
  return usage.cpuPct + (usage.runQueueWaitPct ?? 0);
}

/**
 * "CPU 42 % + run-queue wait 51 % of a core" (the wait only where it was measured), and when the wait is
 * the larger part, that the process was starved rather than busy: its core was taken by other work.
 */
export function demandText(usage: ProcessUsageReport): string {
  const wait = usage.runQueueWaitPct;
  if (wait === null || wait === undefined) return `CPU ${usage.cpuPct.toFixed(0)} % of a core`;
  const starved = wait > usage.cpuPct ? ', mostly waiting for a core other work held' : '';
  return `CPU ${usage.cpuPct.toFixed(0)} % + run-queue wait ${wait.toFixed(0)} % of a core${starved}`;
}
