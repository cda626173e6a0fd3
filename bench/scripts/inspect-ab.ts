// The inspector's cost on the tunnel, measured alternately so both settings see the same noisy machine:
//   node bench/scripts/inspect-ab.ts [pairs=3] [duration=15] [connections=50]
// Runs `bench max --only tunnel` with BENCH_INSPECT=off, then on, `pairs` times, and prints each run and the
// medians of the agent's CPU per request, the tunnel's (edge + agent) and the achieved RPS. Build first.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

interface Sample {
  agentUs: number;
  tunnelUs: number;
  rps: number;
}

interface StageJson {
  tunnel: { achievedRps: number; agent: { cpuPerRequestUs: number }; tunnelCpuPerRequestUs: number };
}

const [pairs = 3, duration = 15, connections = 50] = process.argv.slice(2).map(Number);
const main = resolve(import.meta.dirname, '../dist/main.js');
const scratch = mkdtempSync(join(tmpdir(), 'inspect-ab-'));
const samples: Record<'off' | 'on', Sample[]> = { off: [], on: [] };

function run(mode: 'off' | 'on', index: number): Sample {
  const out = join(scratch, `${mode}-${index}`);
  const args = ['max', '--only', 'tunnel', '--connections', String(connections)];
  args.push('--duration', String(duration), '--warmup', '5', '--out', out);
  execFileSync(process.execPath, [main, ...args], {
    env: { ...process.env, BENCH_INSPECT: mode },
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
  return `${label.padEnd(8)} agent ${s.agentUs.toFixed(1)} µs/req  tunnel ${s.tunnelUs.toFixed(1)} µs/req  ${s.rps.toFixed(0)} rps`;
}

try {
  for (let i = 0; i < pairs; i++) {
    for (const mode of ['off', 'on'] as const) {
      const sample = run(mode, i);
      samples[mode].push(sample);
      process.stdout.write(`${line(`${mode} ${i + 1}`, sample)}\n`);
    }
  }
  const med = (mode: 'off' | 'on'): Sample => ({
    agentUs: median(samples[mode].map((s) => s.agentUs)),
    tunnelUs: median(samples[mode].map((s) => s.tunnelUs)),
    rps: median(samples[mode].map((s) => s.rps)),
  });
  const off = med('off');
  const on = med('on');
  const pct = (a: number, b: number): string => `${(((b - a) / a) * 100).toFixed(1)} %`;
  process.stdout.write(`${line('median off', off)}\n${line('median on', on)}\n`);
  process.stdout.write(
    `on vs off: agent ${pct(off.agentUs, on.agentUs)}, tunnel ${pct(off.tunnelUs, on.tunnelUs)}, rps ${pct(off.rps, on.rps)}\n`,
  );
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
