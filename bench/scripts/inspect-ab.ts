// The inspector's cost on the tunnel, measured alternately so both settings see the same noisy machine:
//   node bench/scripts/inspect-ab.ts [pairs=3] [duration=15] [connections=50] [thread=worker|main|both]
// Runs `bench max --only tunnel` with BENCH_INSPECT=off, then on, `pairs` times, and prints each run and the
// medians of the agent's CPU per request, the tunnel's (edge + agent) and the achieved RPS. Build first.
// Where the agent's tunnel runs: on the main thread by default, whatever its stdout (the bench reads its
// --json lines through a pipe); `worker` sets TUNNEL2_WORKER=1, the tunnel in a worker thread (the default
// under a --json consumer before). `thread` picks one or both (interleaved too); CPU is the whole process's
// (/proc, all threads) either way.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

type Thread = 'worker' | 'main';

interface Sample {
  agentUs: number;
  tunnelUs: number;
  rps: number;
}

interface StageJson {
  tunnel: { achievedRps: number; agent: { cpuPerRequestUs: number }; tunnelCpuPerRequestUs: number };
}

const [pairs = 3, duration = 15, connections = 50] = process.argv.slice(2, 5).map(Number);
const threadArg = process.argv[5] ?? 'worker';
if (threadArg !== 'worker' && threadArg !== 'main' && threadArg !== 'both') {
  throw new Error(`thread: worker, main or both, not "${threadArg}"`);
}
const threads: Thread[] = threadArg === 'both' ? ['worker', 'main'] : [threadArg];
const main = resolve(import.meta.dirname, '../dist/main.js');
const scratch = mkdtempSync(join(tmpdir(), 'inspect-ab-'));
const samples = new Map<string, Sample[]>();

/**
 * TUNNEL2_WORKER applies to every tunnel2 process, the edge too: the worker case sets 1 (the edge then runs in
 * a worker as well; the figures read are the agent's) and the main case 0 (everyone's default).
 */
function threadEnv(thread: Thread): NodeJS.ProcessEnv {
  const { TUNNEL2_WORKER: _given, ...env } = process.env;
  return { ...env, TUNNEL2_WORKER: thread === 'main' ? '0' : '1' };
}

function run(mode: 'off' | 'on', thread: Thread, index: number): Sample {
  const out = join(scratch, `${mode}-${thread}-${index}`);
  const args = ['max', '--only', 'tunnel', '--connections', String(connections)];
  args.push('--duration', String(duration), '--warmup', '5', '--out', out);
  execFileSync(process.execPath, [main, ...args], {
    env: { ...threadEnv(thread), BENCH_INSPECT: mode },
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { stages: StageJson[] };
  const tunnel = report.stages[0]!.tunnel;
  return {
    agentUs: tunnel.agent.cpuPerRequestUs,
    tunnelUs: tunnel.tunnelCpuPerRequestUs,
    rps: tunnel.achievedRps,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function line(label: string, s: Sample): string {
  return `${label.padEnd(18)} agent ${s.agentUs.toFixed(1)} µs/req  tunnel ${s.tunnelUs.toFixed(1)} µs/req  ${s.rps.toFixed(0)} rps`;
}

try {
  for (let i = 0; i < pairs; i++) {
    for (const thread of threads) {
      for (const mode of ['off', 'on'] as const) {
        const sample = run(mode, thread, i);
        const key = `${mode} ${thread}`;
        samples.set(key, [...(samples.get(key) ?? []), sample]);
        process.stdout.write(`${line(`${key} ${i + 1}`, sample)}\n`);
      }
    }
  }
  const med = (key: string): Sample => {
    const all = samples.get(key) ?? [];
    return {
      agentUs: median(all.map((s) => s.agentUs)),
      tunnelUs: median(all.map((s) => s.tunnelUs)),
      rps: median(all.map((s) => s.rps)),
    };
  };
  const pct = (a: number, b: number): string => `${(((b - a) / a) * 100).toFixed(1)} %`;
  for (const thread of threads) {
    const off = med(`off ${thread}`);
    const on = med(`on ${thread}`);
    process.stdout.write(`${line(`median off ${thread}`, off)}\n${line(`median on ${thread}`, on)}\n`);
    process.stdout.write(
      `on vs off (${thread}): agent ${pct(off.agentUs, on.agentUs)}, tunnel ${pct(off.tunnelUs, on.tunnelUs)}, rps ${pct(off.rps, on.rps)}\n`,
    );
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
