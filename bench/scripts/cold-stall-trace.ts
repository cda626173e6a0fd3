// The cold-start stall (issue #19 target 3) seen through V8's own traces: a fresh edge and agent started with
// `--trace-opt --trace-gc-nvp` (plus STALL_NODE_FLAGS, e.g. `--concurrent-turbofan-max-threads=1`), then the
// given stages at a fixed rate, every trace line stamped with the time it arrived. Prints, per stage, the
// tunnel's p99 and max, and per process and per second the TurboFan/Maglev compilations (their wall time
// as V8 reports it), the collections (count, sum and max pause, and the worst one's phases), and from
// /proc/<pid>/task/*/schedstat the CPU and the run-queue wait of the JS thread and of V8's worker pool
// (compilers and GC helpers), so a compile wave, slow scavenges and a starved JS thread line up.
//   node bench/scripts/cold-stall-trace.ts [stages=20,50,100,200,500,1000] [duration=10]
// STALL_TRACE_DIR keeps the raw traces (edge.log, agent.log); STALL_RENICE=n sets V8's worker threads of
// both processes to nice n once they are ready (Linux). Build first.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { createInterface } from 'node:readline';
import { runLoad } from '../dist/measure/load-runner.js';
import { readCpuMs } from '../dist/measure/process-stats.js';
import { runtime } from '../dist/runtime-paths.js';
import { jsonEvent, startBackendService, targetOf } from '../dist/stacks/bench-stack.js';

const [stagesArg = '20,50,100,200,500,1000', durationArg = '10'] = process.argv.slice(2);
const stages = stagesArg.split(',').map(Number);
const duration = Number(durationArg);
const extraFlags = (process.env.STALL_NODE_FLAGS ?? '').split(/\s+/).filter((flag) => flag !== '');
const traceFlags = ['--trace-opt', '--trace-gc-nvp', ...extraFlags];

interface Traced {
  pid: number;
  startedAt: number;
  lines: { at: number; text: string }[];
  ready: Promise<string>;
  kill(): void;
}

function startTraced(args: string[], readyEvent: string): Traced {
  const startedAt = performance.now();
  const child = spawn(process.execPath, [...traceFlags, runtime.cliBin(), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: { at: number; text: string }[] = [];
  const ready = new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${args[0]} exited (${code})`)));
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (text) => {
        lines.push({ at: performance.now() - startedAt, text });
        const url = jsonEvent(text, readyEvent)?.url;
        if (typeof url === 'string') resolve(url);
      });
    }
  });
  return { pid: child.pid!, startedAt, lines, ready, kill: () => child.kill('SIGKILL') };
}

const num = (text: string, key: string): number => {
  const match = new RegExp(`(?:^|\\s)${key}=([0-9.]+)`).exec(text);
  return match === null ? 0 : Number(match[1]);
};

/** Per thread group (JS thread, V8Worker pool), per second since start: CPU and run-queue wait from schedstat. */
interface Sched {
  jsCpu: number;
  jsWait: number;
  poolCpu: number;
  poolWait: number;
}
const schedSeconds = new Map<number, Map<number, Sched>>();
const lastSched = new Map<string, [number, number]>();
function sampleSched(traced: Traced): void {
  const second = Math.floor((performance.now() - traced.startedAt) / 1000);
  let perPid = schedSeconds.get(traced.pid);
  if (perPid === undefined) {
    perPid = new Map();
    schedSeconds.set(traced.pid, perPid);
  }
  let entry = perPid.get(second);
  if (entry === undefined) {
    entry = { jsCpu: 0, jsWait: 0, poolCpu: 0, poolWait: 0 };
    perPid.set(second, entry);
  }
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${traced.pid}/task`);
  } catch {
    return;
  }
  for (const tid of tids) {
    try {
      const comm = readFileSync(`/proc/${traced.pid}/task/${tid}/comm`, 'utf8').trim();
      const [cpu = 0, wait = 0] = readFileSync(`/proc/${traced.pid}/task/${tid}/schedstat`, 'utf8')
        .split(' ')
        .map(Number);
      const [lastCpu, lastWait] = lastSched.get(tid) ?? [cpu, wait];
      lastSched.set(tid, [cpu, wait]);
      // The agent's tunnel runs in a worker with TUNNEL2_WORKER=1 (the default for a piped stdout, as here,
      // before): its JS thread is then WorkerThread.
      const js =
        comm === 'WorkerThread' ||
        (comm === 'MainThread' && !tids.some((t) => t !== tid && isWorker(traced.pid, t)));
      if (js) {
        entry.jsCpu += (cpu - lastCpu) / 1e6;
        entry.jsWait += (wait - lastWait) / 1e6;
      } else if (comm === 'V8Worker') {
        entry.poolCpu += (cpu - lastCpu) / 1e6;
        entry.poolWait += (wait - lastWait) / 1e6;
      }
    } catch {}
  }
}
function isWorker(pid: number, tid: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() === 'WorkerThread';
  } catch {
    return false;
  }
}

/** Per second since the process started: compilations and scavenges. */
function summarize(name: string, traced: Traced, fromSec: number): void {
  interface Second {
    turbofan: number;
    maglev: number;
    compileMs: number;
    scavenges: number;
    pauseSum: number;
    pauseMax: number;
    worst: string;
  }
  const seconds = new Map<number, Second>();
  const at = (second: number): Second => {
    let entry = seconds.get(second);
    if (entry === undefined) {
      entry = { turbofan: 0, maglev: 0, compileMs: 0, scavenges: 0, pauseSum: 0, pauseMax: 0, worst: '' };
      seconds.set(second, entry);
    }
    return entry;
  };
  for (const { at: arrivedMs, text } of traced.lines) {
    const compiled =
      /\[completed compiling .*\(target (TURBOFAN_JS|MAGLEV)\).* took ([0-9.]+), ([0-9.]+), ([0-9.]+) ms/.exec(
        text,
      );
    if (compiled !== null) {
      const entry = at(Math.floor(arrivedMs / 1000));
      if (compiled[1] === 'MAGLEV') entry.maglev += 1;
      else entry.turbofan += 1;
      entry.compileMs += Number(compiled[2]) + Number(compiled[3]) + Number(compiled[4]);
      continue;
    }
    const gc = /\s([0-9]+) ms: pause=([0-9.]+) .*gc=(\S+)/.exec(text);
    if (gc === null) continue;
    const entry = at(Math.floor(Number(gc[1]) / 1000));
    const pause = Number(gc[2]);
    entry.scavenges += gc[3] === 's' ? 1 : 0;
    entry.pauseSum += pause;
    if (pause >= entry.pauseMax) {
      entry.pauseMax = pause;
      entry.worst =
        `gc=${gc[3]} safepoint=${num(text, 'time_to_safepoint')} scavenge=${num(text, 'scavenge')} ` +
        `roots=${num(text, 'scavenge.roots')} parallel=${num(text, 'scavenge.parallel')} ` +
        `bg.parallel=${num(text, 'background.scavenge.parallel')} promoted=${num(text, 'promoted')} ` +
        `survived=${num(text, 'new_space_survived')} mutator=${num(text, 'mutator')}`;
    }
  }
  console.log(`\n${name} (load from ${fromSec.toFixed(1)} s after start)`);
  console.log(
    'sec  TF  ML  compile-ms  gcs  pause-sum  pause-max | js-cpu js-wait pool-cpu pool-wait | worst',
  );
  const sched = schedSeconds.get(traced.pid);
  for (const [second, e] of [...seconds.entries()].sort((a, b) => a[0] - b[0])) {
    if (second < fromSec - 1) continue;
    console.log(
      `${String(second).padStart(3)} ${String(e.turbofan).padStart(3)} ${String(e.maglev).padStart(3)} ` +
        `${e.compileMs.toFixed(0).padStart(10)} ${String(e.scavenges).padStart(4)} ${e.pauseSum.toFixed(1).padStart(9)} ` +
        `${e.pauseMax.toFixed(1).padStart(9)} | ${schedText(sched?.get(second))} | ${e.pauseMax >= 5 ? e.worst : ''}`,
    );
  }
}

function schedText(entry: Sched | undefined): string {
  if (entry === undefined) return ' '.repeat(33);
  return [entry.jsCpu, entry.jsWait, entry.poolCpu, entry.poolWait]
    .map((v) => v.toFixed(0).padStart(7))
    .join(' ');
}

const backend = await startBackendService();
const edge = startTraced(
  ['server', '--port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'warn'],
  'listening',
);
const agent = startTraced(
  [
    'http',
    backend.readyValue,
    '--server',
    await edge.ready,
    '--subdomain',
    'stall',
    '--json',
    '--log-level',
    'warn',
    '--inspect',
    '127.0.0.1:0',
  ],
  'ready',
);
/** STALL_RENICE=n: V8's worker threads (compilers, GC helpers) of the edge and the agent at nice n. */
function renice(pid: number, nice: number): number {
  let count = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    if (readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() !== 'V8Worker') continue;
    setPriority(Number(tid), nice);
    count += 1;
  }
  return count;
}
try {
  const target = targetOf(await agent.ready);
  if (process.env.STALL_RENICE !== undefined) {
    const nice = Number(process.env.STALL_RENICE);
    console.log(`reniced V8Worker threads: edge ${renice(edge.pid, nice)}, agent ${renice(agent.pid, nice)}`);
  }
  const loadFrom = performance.now();
  const sampler = setInterval(() => {
    sampleSched(edge);
    sampleSched(agent);
  }, 100);
  const results: string[] = [];
  for (const rate of stages) {
    const result = await runLoad({
      target,
      path: '/loadtest/get',
      connections: Math.max(1, Math.ceil(rate / 10)),
      durationSec: duration,
      ratePerSec: rate,
      timeoutSec: 10,
    });
    results.push(
      `${rate} RPS: p99 ${result.correctedLatency.p99.toFixed(2)} ms, max ${result.correctedLatency.max.toFixed(1)} ms, ` +
        `${result.outcomes.finished} answered, ${result.outcomes.errorCount()} errors`,
    );
  }
  clearInterval(sampler);
  console.log(`flags: ${traceFlags.join(' ')}`);
  console.log(results.join('\n'));
  console.log(`CPU ms: edge ${readCpuMs(edge.pid)}, agent ${readCpuMs(agent.pid)}`);
  summarize('edge', edge, (loadFrom - edge.startedAt) / 1000);
  summarize('agent', agent, (loadFrom - agent.startedAt) / 1000);
  const dir = process.env.STALL_TRACE_DIR;
  if (dir !== undefined) {
    mkdirSync(dir, { recursive: true });
    for (const [name, traced] of [
      ['edge', edge],
      ['agent', agent],
    ] as const) {
      writeFileSync(`${dir}/${name}.log`, traced.lines.map((l) => `${l.at.toFixed(0)} ${l.text}`).join('\n'));
    }
  }
} finally {
  agent.kill();
  edge.kill();
  await backend.stop();
}
