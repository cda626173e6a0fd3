// The same file as packages/cli/bin/malloc-arenas.js (`tunnel2 server` and this executable run the edge's
// malloc alike); plain JS, as that one must be.

/**
 * Why at most one malloc arena. glibc gives every thread that allocates its own arena (up to 8 per core), and
 * what a thread frees stays in its arena as free chunks: V8's helper threads (scavenges, concurrent
 * marking, TurboFan's compile zones) and the main thread's socket buffers left 20-40 MiB of free chunks in
 * 5-8 arenas of an agent at its peak. With one arena the threads reuse each other's free chunks: in
 * `pnpm bench max` at 100 connections the agent peaked at 99-105 MiB against 119-121 and the edge at 97-100
 * against 103-109, for a CPU per request this machine cannot tell apart (ratio 1.01, 0.99-1.04); glibc's
 * per-thread caches keep small allocations off the arena's lock (bench/README.md, "malloc arenas").
 * glibc reads MALLOC_ARENA_MAX once, as the process starts, so the process is executed again with it set:
 * the same pid, argv and stdio, ~30 ms later.
 */

/** The arenas when TUNNEL2_MALLOC_ARENAS is unset. */
export const DEFAULT_MALLOC_ARENAS = 1;

/**
 * The value of TUNNEL2_MALLOC_ARENAS as a number of arenas (0: leave glibc's default), or a one-line problem.
 * @param {string | undefined} value
 * @returns {{ arenas: number } | { problem: string }}
 */
export function parseMallocArenas(value) {
  if (value === undefined || value === '') return { arenas: DEFAULT_MALLOC_ARENAS };
  const arenas = Number(value);
  if (!/^\d+$/.test(value) || arenas > 64) {
    return { problem: 'TUNNEL2_MALLOC_ARENAS must be an integer in [0, 64] (0: glibc decides)' };
  }
  return { arenas: arenas };
}

/**
 * Whether this process should be executed again with MALLOC_ARENA_MAX set: only a glibc Linux process whose
 * environment says nothing about arenas yet (an operator's MALLOC_ARENA_MAX or GLIBC_TUNABLES wins, and
 * the executed process sees its own setting and does not come back here), with `process.execve` (Node
 * 22.15 and later), and not under a debugger that would be started twice.
 * @param {number} arenas
 * @param {NodeJS.ProcessEnv} env
 * @param {string} nodeFlags the process's execArgv and NODE_OPTIONS, space-separated
 * @param {() => string | undefined} glibcVersion glibc's version, or undefined on another C library
 */
export function shouldLimitArenas(arenas, env, nodeFlags, glibcVersion) {
  if (arenas === 0 || process.platform !== 'linux' || typeof process.execve !== 'function') return false;
  if (env.MALLOC_ARENA_MAX !== undefined) return false;
  if (env.GLIBC_TUNABLES !== undefined && env.GLIBC_TUNABLES.indexOf('arena_max') !== -1) return false;
  if (/--inspect|--debug/.test(nodeFlags)) return false;
  return glibcVersion() !== undefined;
}

/** glibc's version from Node's diagnostic report header (~3 ms), or undefined on musl and other libcs. */
export function runtimeGlibcVersion() {
  const report = process.report;
  if (report === undefined) return undefined;
  report.excludeNetwork = true;
  const header = /** @type {{ header?: { glibcVersionRuntime?: string } }} */ (report.getReport()).header;
  return header === undefined ? undefined : header.glibcVersionRuntime;
}

/**
 * Executes this process again with MALLOC_ARENA_MAX=`arenas` when shouldLimitArenas says so; returns when it
 * does not, or when the system refuses (the process then runs with glibc's arenas, as before).
 * @param {number} arenas
 */
export function execWithMallocArenas(arenas) {
  const nodeFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS || ''}`;
  if (!shouldLimitArenas(arenas, process.env, nodeFlags, runtimeGlibcVersion)) return;
  const env = Object.assign({}, process.env, { MALLOC_ARENA_MAX: String(arenas) });
  try {
    process.execve(process.execPath, [process.execPath].concat(process.execArgv, process.argv.slice(1)), env);
  } catch {
    // Not executable again (a seccomp policy, an execPath gone since start): run as is.
  }
}
