// Two agent settings loaded at the same time: one backend, two edges, each with its own agent started with
// its own environment (e.g. `TUNNEL2_HEAP_GROWING_PERCENT=300` against `=50`), each sent the same load at
// once, so whatever else the machine is doing falls on both alike (issue #34: this machine ran four other
// engineers' benches, and runs one after the other swung 2x in CPU per request).
//   node bench/scripts/agent-env-concurrent.ts [rounds=4] [rate=closed] [duration=10] [connections=100] [A=-] [B=-]
// A and B: the agent's added environment as `NAME=value,NAME=value`, or `-` for none. rate: requests per
// second per side, or `closed` for a closed loop. Prints per round each agent's CPU per request (from
// /proc) and its peak RSS in the round (VmHWM, MiB), the ratio B ÷ A, and the medians. The agents run on
// their main thread, as in `pnpm bench` (TUNNEL2_WORKER=1 as a side's environment puts it in a worker).
// ENV_SIDE=both gives each side's environment to its edge too and measures edge + agent (CPU per request of
// the two together, peak RSS of each). Build first.
import { runLoad } from '../dist/measure/load-runner.js';
import { meterProcess } from '../dist/measure/process-stats.js';
import {
  type LoadTarget,
  startAgentService,
  startBackendService,
  startEdgeService,
  targetOf,
} from '../dist/stacks/bench-stack.js';

const args = process.argv.slice(2);
const rounds = Number(args[0] ?? 4);
const rate = args[1] === undefined || args[1] === 'closed' ? undefined : Number(args[1]);
const duration = Number(args[2] ?? 10);
const connections = Number(args[3] ?? 100);
const specs = [args[4] ?? '-', args[5] ?? '-'] as const;
const bothSides = process.env.ENV_SIDE === 'both';

function parseEnv(spec: string): Record<string, string> {
  if (spec === '-') return {};
  const env: Record<string, string> = {};
  for (const pair of spec.split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`not NAME=value: ${pair}`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

const load = (target: LoadTarget, durationSec: number): ReturnType<typeof runLoad> =>
  runLoad({ target, path: '/loadtest/get', connections, durationSec, ratePerSec: rate, timeoutSec: 10 });

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const backend = await startBackendService();
const started = [backend];
try {
  const sides = [];
  for (const [i, spec] of specs.entries()) {
    const edge = await startEdgeService([], bothSides ? { ...process.env, ...parseEnv(spec) } : undefined);
    started.push(edge);
    const agent = await startAgentService(
      backend.readyValue,
      edge.readyValue,
      `env-${i}`,
      undefined,
      false,
      [],
      parseEnv(spec),
    );
    started.push(agent);
    sides.push({ spec, agent, edge, target: targetOf(agent.readyValue) });
  }
  await Promise.all(sides.map((side) => load(side.target, 3))); // warm-up, discarded
  const cpu: number[][] = [[], []];
  const rss: number[][] = [[], []];
  for (let round = 1; round <= rounds; round++) {
    const meters = sides.map((side) => meterProcess(side.agent.pid));
    const edgeMeters = bothSides ? sides.map((side) => meterProcess(side.edge.pid)) : [];
    const results = await Promise.all(sides.map((side) => load(side.target, duration)));
    const line: string[] = [];
    for (const [i, meter] of meters.entries()) {
      const usage = meter.stop();
      const edgeUsage = edgeMeters[i]?.stop();
      const ok = results[i]!.outcomes.ok;
      const us = (((usage?.cpuMs ?? 0) + (edgeUsage?.cpuMs ?? 0)) * 1000) / Math.max(1, ok);
      cpu[i]!.push(us);
      rss[i]!.push(usage?.peakRssMb ?? 0);
      const edgePeak = edgeUsage === undefined ? '' : `, edge ${(edgeUsage?.peakRssMb ?? 0).toFixed(0)} MiB`;
      line.push(
        `${specs[i]}: ${us.toFixed(1)} µs, ${(usage?.peakRssMb ?? 0).toFixed(0)} MiB${edgePeak} (${ok} ok)`,
      );
    }
    process.stdout.write(
      `round ${round}: ${bothSides ? 'edge + agent' : 'agent'} ${line.join(' | ')}; CPU B ÷ A ${(cpu[1]![round - 1]! / cpu[0]![round - 1]!).toFixed(3)}\n`,
    );
  }
  const ratios = cpu[1]!.map((us, i) => us / cpu[0]![i]!);
  process.stdout.write(
    `median: agent CPU A ${median(cpu[0]!).toFixed(1)} µs, B ${median(cpu[1]!).toFixed(1)} µs, ` +
      `ratio ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); ` +
      `peak RSS A ${Math.min(...rss[0]!).toFixed(0)}–${Math.max(...rss[0]!).toFixed(0)}, ` +
      `B ${Math.min(...rss[1]!).toFixed(0)}–${Math.max(...rss[1]!).toFixed(0)} MiB\n`,
  );
} finally {
  for (const service of started.reverse()) await service.stop();
}
