// The edge's young generation, two sizes loaded at the same time: one backend, two edges (`tunnel2 server`
// with TUNNEL2_YOUNG_GENERATION_MB=A and =B), each with its own agent, each sent the same load at once, so
// whatever else the machine is doing falls on both alike (issue #34: the machine this was written on ran
// four other engineers' benches, and runs one after the other swung 2x).
//   node bench/scripts/edge-young-concurrent.ts [rounds=4] [rate=closed] [duration=10] [connections=100] [A=3] [B=6]
// rate: requests per second per side, or `closed` for a closed loop. Prints per round each edge's CPU per
// request (from /proc) and its peak RSS in the round (VmHWM), the ratio B ÷ A, and the medians. Build first.
// YOUNG_SIDE=agent gives the sizes to the two agents instead (on their main thread, a third of it per
// semi-space; TUNNEL2_WORKER=1 in the environment puts them in a worker), the edges at their default, and
// measures the agents.
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
const sizes = [args[4] ?? '3', args[5] ?? '6'] as const;
const agentSide = process.env.YOUNG_SIDE === 'agent';

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
  for (const [i, size] of sizes.entries()) {
    const young = { TUNNEL2_YOUNG_GENERATION_MB: size };
    const edge = await startEdgeService([], agentSide ? {} : young);
    started.push(edge);
    const agent = await startAgentService(
      backend.readyValue,
      edge.readyValue,
      `young-${i}`,
      undefined,
      false,
      [],
      agentSide ? young : {},
    );
    started.push(agent);
    sides.push({ size, measured: agentSide ? agent : edge, target: targetOf(agent.readyValue) });
  }
  await Promise.all(sides.map((side) => load(side.target, 3))); // warm-up, discarded
  const cpu: number[][] = [[], []];
  const rss: number[][] = [[], []];
  for (let round = 1; round <= rounds; round++) {
    const meters = sides.map((side) => meterProcess(side.measured.pid));
    const results = await Promise.all(sides.map((side) => load(side.target, duration)));
    const line: string[] = [];
    for (const [i, meter] of meters.entries()) {
      const usage = meter.stop();
      const ok = results[i]!.outcomes.ok;
      const us = ((usage?.cpuMs ?? 0) * 1000) / Math.max(1, ok);
      cpu[i]!.push(us);
      rss[i]!.push(usage?.peakRssMb ?? 0);
      line.push(`${sizes[i]} MB: ${us.toFixed(1)} µs, ${(usage?.peakRssMb ?? 0).toFixed(0)} MB (${ok} ok)`);
    }
    process.stdout.write(
      `round ${round}: ${agentSide ? 'agent' : 'edge'} ${line.join(' | ')}; CPU ${sizes[1]} ÷ ${sizes[0]} ${(cpu[1]![round - 1]! / cpu[0]![round - 1]!).toFixed(3)}\n`,
    );
  }
  const ratios = cpu[1]!.map((us, i) => us / cpu[0]![i]!);
  process.stdout.write(
    `median: ${agentSide ? 'agent' : 'edge'} CPU ${sizes[0]} MB ${median(cpu[0]!).toFixed(1)} µs, ${sizes[1]} MB ${median(cpu[1]!).toFixed(1)} µs, ` +
      `ratio ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); ` +
      `peak RSS ${sizes[0]} MB ${Math.min(...rss[0]!).toFixed(0)}–${Math.max(...rss[0]!).toFixed(0)}, ` +
      `${sizes[1]} MB ${Math.min(...rss[1]!).toFixed(0)}–${Math.max(...rss[1]!).toFixed(0)}\n`,
  );
} finally {
  for (const service of started.reverse()) await service.stop();
}
