#!/usr/bin/env node
// A plain-JS entry so an unsupported Node fails with one clear line instead of a syntax or import error: this
// file and check-node.js use only syntax that old Node versions parse (no top-level await, `||=`, `??`).
// biome-ignore lint/style/useNodejsImportProtocol: Node before 14.13 cannot import 'node:' specifiers, and this file must still run there to say which version is needed.
import * as nodeModule from 'module';
// biome-ignore lint/style/useNodejsImportProtocol: as above, old Node must reach the version check.
import { setFlagsFromString } from 'v8';
import { checkNodeVersion } from './check-node.js';
import { execWithMallocArenas, parseMallocArenas } from './malloc-arenas.js';
import { loadWithoutOptimizingCompiler } from './optimizing-compiler.js';
import { holdSemiSpace } from './young-generation.js';

const problem = checkNodeVersion(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

// A command that runs a tunnel or an edge is executed again with glibc's malloc held to one arena first
// (malloc-arenas.js says why); one that prints and exits (`--version`, `token`, `http --help`) is not worth
// the ~30 ms. TUNNEL2_MALLOC_ARENAS changes the number (0 = glibc's default); MALLOC_ARENA_MAX, when set,
// is left alone.
const arenaSetting = parseMallocArenas(process.env.TUNNEL2_MALLOC_ARENAS);
if ('problem' in arenaSetting) {
  process.stderr.write(`tunnel2: ${arenaSetting.problem}\n`);
  process.exit(1);
}
const command = process.argv[2];
const runsLong = command === 'http' || command === 'tcp' || command === 'start' || command === 'server';
const printsOnly = process.argv.some(
  (arg) => arg === '--help' || arg === '-h' || arg === '--version' || arg === '-V',
);
if (runsLong && !printsOnly) execWithMallocArenas(arenaSetting.arenas);

// V8 schedules the next full collection when the old generation has grown by a margin over what survived
// the last one, and for a heap as small as a tunnel's (~13 MB) that margin is a few MB. A proxy allocates
// socket buffers at line rate; enough of them outlive a scavenge to cross the margin every few MB moved, and
// V8 then runs full collections back to back (85 per GiB through the edge, three times the CPU of the same
// transfer without them, bench/README.md). A fixed growing factor of 1 + 300 % lets the edge's old generation
// reach four times its live size first. An agent's is 1 + 150 %: with 100 requests in flight its small young
// generation promotes most of what they hold, and at 4x its old generation (and the dead socket buffers it
// keeps) took its peak RSS to 155-159 MiB in `bench max`; at 2.5x 133-142 MiB, for no CPU per request or bulk
// CPU this machine could show, and 6 MiB more at the peak of a bulk upload (at 2x a bulk transfer cost 15-30 %
// more CPU: bench/README.md, optimization log). TUNNEL2_HEAP_GROWING_PERCENT changes either (0 = V8's own
// heuristic). Set before the worker starts: V8 flags are per process and read at every collection.
const growingPercent = Number(
  process.env.TUNNEL2_HEAP_GROWING_PERCENT || (process.argv[2] === 'server' ? 300 : 150),
);
if (!(Number.isInteger(growingPercent) && growingPercent >= 0 && growingPercent <= 1000)) {
  process.stderr.write('tunnel2: TUNNEL2_HEAP_GROWING_PERCENT must be an integer in [0, 1000]\n');
  process.exit(1);
}
if (growingPercent > 0) setFlagsFromString(`--heap-growing-percent=${growingPercent}`);

// V8 allocates straight into the old generation from an allocation site whose objects mostly survived a
// scavenge (pretenuring). Here that misfires: per-request objects then die in the old generation, where only
// a full collection frees them, and every old object pointing at a young one is more work for each scavenge.
// At 1,000 RPS with V8's default the edge ran a full collection every ~12 s and spent twice the time in
// scavenges (bench/README.md, optimization log). TUNNEL2_V8_PRETENURING=1 restores V8's default.
const pretenuring = process.env.TUNNEL2_V8_PRETENURING || '0';
if (pretenuring !== '0' && pretenuring !== '1') {
  process.stderr.write('tunnel2: TUNNEL2_V8_PRETENURING must be 0 or 1\n');
  process.exit(1);
}
if (pretenuring === '0') setFlagsFromString('--no-allocation-site-pretenuring');

// V8's compiled code for the CLI's modules is kept on disk (Node's compile cache, in the OS temp folder)
// and reused by the next start instead of compiling every module again. NODE_DISABLE_COMPILE_CACHE=1 turns
// it off; Node before 22.1 has no compile cache.
if (typeof nodeModule.enableCompileCache === 'function') nodeModule.enableCompileCache();

const holdTurbofan = process.env.TUNNEL2_HOLD_TURBOFAN || '1';
if (holdTurbofan !== '0' && holdTurbofan !== '1') {
  process.stderr.write('tunnel2: TUNNEL2_HOLD_TURBOFAN must be 0 or 1\n');
  process.exit(1);
}

const main = new URL('../dist/main.js', import.meta.url);
const workerSetting = process.env.TUNNEL2_WORKER || '';
if (workerSetting !== '' && workerSetting !== '0' && workerSetting !== '1') {
  process.stderr.write('tunnel2: TUNNEL2_WORKER must be 0 or 1\n');
  process.exit(1);
}
// The young generation, of the worker (below) or of the main thread (its semi-spaces a third of it: two
// semi-spaces and V8's young large-object space). The edge's is 6 MB (2 MB semi-spaces): with 100 requests in
// flight 1 MB semi-spaces promoted much of what they hold, the old generation grew by the heap growing factor
// above, and the collector took ~20 % of the edge's CPU. With 6 MB, both loaded at once: edge CPU per request
// 0.84x in a closed loop and 0.95x at 1,000 RPS, peak RSS in `bench max` 100-139 MB against 128-156, and
// 10-15 MB more in a bulk transfer (bench/README.md, optimization log). With 6 MB the edge still runs in one
// of two regimes, chosen in the first second of load and kept: nothing promoted, or ~0.35 MB per scavenge
// and a full collection every ~1.5 s (peak in `bench max` ~105 or 150-177 MiB). 9 MB (3 MB semi-spaces)
// gave ~100 MiB in every run, for ~7 % more edge CPU per request and ~10 MiB more at a bulk transfer's
// peak: an operator's choice, not the default (bench/README.md, "the edge's bimodal peak"). An agent's
// stays at 3 MB: 6 MB saved its worker 7 % of CPU but held 15-20 MB more in bulk transfers, and its idle
// RSS counts.
const youngMb = Number(process.env.TUNNEL2_YOUNG_GENERATION_MB || (process.argv[2] === 'server' ? 6 : 3));
if (!(youngMb >= 1 && youngMb <= 256)) {
  process.stderr.write('tunnel2: TUNNEL2_YOUNG_GENERATION_MB must be a number of MB in [1, 256]\n');
  process.exit(1);
}
if (process.env.TUNNEL2_IN_PROCESS === '1') {
  // V8's own young generation sizing (semi-spaces that grow to 16 MB and more under load).
  import(main.href);
} else if (workerSetting !== '1') {
  // The tunnel runs on the main thread with a small young generation: buffers that a proxy churns through
  // at line rate are then freed by frequent cheap scavenges instead of piling up until a full GC, which keeps
  // RSS flat. The semi-space size cannot be set from inside a running process, but whether it grows can
  // (young-generation.js): held at a third of TUNNEL2_YOUNG_GENERATION_MB it is the young generation the
  // worker below gets, without the worker's second isolate (about 10 MB of RSS). A semi-space size given to
  // node itself is left alone.
  // Whatever stdout is. A pipe or socket (`--json | jq`, systemd, docker logs) does not block the tunnel on a
  // reader that falls behind: libuv opens it non-blocking (O_NONBLOCK, which Node sets for any process with a
  // piped stdout and restores at exit), writes what the pipe takes at once and queues the rest, and the line
  // writer (src/terminal/line-writer.ts) stops writing until 'drain', holds a bounded amount and drops and
  // counts past it. A terminal is made asynchronous likewise (src/terminal/terminal.ts).
  const nodeFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS || ''}`;
  if (!nodeFlags.includes('semi-space')) holdSemiSpace(youngMb / 3);
  // V8's optimizing compiler waits until the CLI's modules are loaded (optimizing-compiler.js says why).
  loadWithoutOptimizingCompiler(() => import(main.href), nodeFlags);
} else {
  // TUNNEL2_WORKER=1: the tunnel in a worker, the main thread relaying its lines to stdout and its signals.
  // The default until an agent with a piped stdout was measured on the main thread as fast under a busy
  // reader, with 12-17 MiB less at its peak (bench/README.md, optimization log); kept to compare. Node flags
  // cannot be set from inside a running process, and re-executing would orphan the child on SIGKILL; a
  // worker has neither problem. TUNNEL2_YOUNG_GENERATION_MB trades memory for CPU (a larger young
  // generation scavenges less often).
  // The main thread only relays the worker's lines, but left to V8 its semi-spaces grew to 4 MB under the
  // lines of 3,000 requests a second (its heap 18 MB against 9 held). Held at 1 MB as on the main-thread
  // path: the growth factor is a per-process flag, and a worker's semi-spaces start at 1 MB, so it is held
  // only while the worker's own young generation is no larger (the default 3 MB: two semi-spaces and V8's
  // young large-object space).
  const nodeFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS || ''}`;
  if (youngMb <= 3 && !nodeFlags.includes('semi-space')) holdSemiSpace(1);
  import('node:worker_threads').then(({ Worker }) => {
    // A worker's stdout is a pipe to this thread: whether it ends in a terminal, and the terminal's size and
    // resizes, are known only here (src/terminal/terminal.ts reads them).
    const tty = process.stdout.isTTY === true;
    const worker = new Worker(main, {
      argv: process.argv.slice(2),
      resourceLimits: { maxYoungGenerationSizeMb: youngMb },
      workerData: {
        stdoutTerminal: tty ? { columns: process.stdout.columns, rows: process.stdout.rows } : undefined,
      },
    });
    const onResize = () =>
      worker.postMessage({ type: 'resize', columns: process.stdout.columns, rows: process.stdout.rows });
    if (tty) process.stdout.on('resize', onResize);
    for (const signal of ['SIGINT', 'SIGTERM']) {
      process.on(signal, () => {
        // A terminal echoed ^C without ending the line: the worker's next line must not follow it there
        // (src/terminal/ctrl-c-echo.ts, for the worker, whose streams are pipes to this thread).
        if (signal === 'SIGINT' && process.stdout.isTTY) process.stdout.write('\n');
        else if (signal === 'SIGINT' && process.stderr.isTTY) process.stderr.write('\n');
        worker.postMessage({ type: 'signal', signal });
      });
    }
    // stdout's reader may go away while the tunnel serves (`tunnel2 http 3000 --json | head -1`): unheard, the
    // write error would end the process, and the tunnel with it. The pipe from the worker is undone by then
    // (Readable#pipe drops a destination that errors); what the worker still sends is discarded, and the
    // worker is told so that it stops writing lines and says so once on stderr (src/terminal/stdout-closed.ts).
    process.stdout.on('error', (err) => {
      worker.stdout.resume();
      worker.postMessage({ type: 'stdout-closed', code: err.code || err.name });
    });
    // A closed stderr (`2>&1 | head -1`) leaves nowhere to say anything: what the worker writes there is dropped.
    process.stderr.on('error', () => worker.stderr.resume());
    worker.on('error', (err) => {
      process.stderr.write(`tunnel2: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    });
    worker.on('exit', (code) => {
      process.stdout.off('resize', onResize);
      if (!process.exitCode) process.exitCode = code;
      // What the worker wrote last is relayed to stdout; a reader that is alive but no longer reads would
      // keep this thread waiting on it for good (SIGTERM then did nothing): a second, then exit anyway.
      setTimeout(() => process.exit(), 1_000).unref();
    });
  });
}
