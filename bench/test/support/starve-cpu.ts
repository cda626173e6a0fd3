import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * Starving one process of CPU on a shared machine, deterministically: a busy loop pinned to one core, and
 * the process moved onto that core (all its threads) at nice 19. The kernel then gives it a fixed small
 * share of that core whatever else runs on the machine, so a rate that needs more saturates it.
 */
export const STARVED_CORE = 0;

/**
 * A busy loop in its own process on STARVED_CORE; kill it when done. It ends by itself after two minutes
 * (each run needs under 30 s) so that a test runner killed before its cleanup leaves no core burning.
 */
export function startBusyLoop(): ChildProcess {
  const loop = 'const end = Date.now() + 120_000; while (Date.now() < end) {}';
  return spawn('taskset', ['-c', String(STARVED_CORE), process.execPath, '-e', loop], { stdio: 'ignore' });
}

/**
 * Moves `pid` onto STARVED_CORE at nice 19, every thread (a nice is per thread on Linux, and an event loop
 * waits for its GC helpers): about 1.5 % of the core is left to it (weight 15 against the loop's 1024).
 */
export function starve(pid: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(STARVED_CORE), String(pid)], { stdio: 'ignore' });
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    execFileSync('renice', ['-n', '19', '-p', tid], { stdio: 'ignore' });
  }
}

/** Gives `pid` (every thread) every core again; its nice stays (only root may lower it). */
export function release(pid: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', `0-${availableParallelism() - 1}`, String(pid)], {
    stdio: 'ignore',
  });
}

/** The pids of `parent`'s live children whose command line contains every one of `words`. */
export function childPids(parent: number, words: readonly string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (words.every((word) => argv.includes(word))) pids.push(Number(entry));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return pids;
}
