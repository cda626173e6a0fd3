// Two builds of the tunnel loaded at the same time: one backend, and for each build (this tree and another
// worktree, e.g. `git worktree add ../base main` built with `pnpm exec tsc -b`) its own edge and agent,
// started from that tree's `tunnel2`; each sent the same load at once, so whatever else the machine is doing
// falls on both alike (issue #34: runs one after the other swung 2x on a shared machine). The stack started
// second read up to 10 % cheaper in an A/A run (the same build twice): AB_FIRST=this starts this tree's
// stack first instead of the other's, so a claim alternates both orders.
//   node bench/scripts/tunnel-build-ab.ts <other-tree> [rounds=4] [rate=closed] [duration=10] [connections=100]
// Prints per round each build's edge and agent CPU per answered request (from /proc), the ratio this ÷
// other of edge + agent, and the medians (of edge + agent, and of each side's own ratio). Rounds of one run
// share their processes, and a stack's processes kept a persistent advantage of up to ±20 % (edge) over
// the other's in A/A runs: repeat the whole run (fresh processes) and read the runs' medians, with A/A runs
// (this tree as the other) between them as the control. The agents run as in `pnpm bench` (the script
// reads their stdout: a build before the agent ran on the main thread whatever stdout is puts them in a worker). Build both trees first.
import { join, resolve } from 'node:path';
import { runLoad } from '../dist/measure/load-runner.js';
import { meterProcess } from '../dist/measure/process-stats.js';
import * as here from '../dist/stacks/bench-stack.js';

const args = process.argv.slice(2);
if (args[0] === undefined) {
  process.stderr.write(
    'usage: tunnel-build-ab.ts <other-tree> [rounds] [rate|closed] [duration] [connections]\n',
  );
  process.exit(2);
}
const otherTree = resolve(args[0]);
const rounds = Number(args[1] ?? 4);
const rate = args[2] === undefined || args[2] === 'closed' ? undefined : Number(args[2]);
const duration = Number(args[3] ?? 10);
const connections = Number(args[4] ?? 100);
const other = (await import(join(otherTree, 'bench/dist/stacks/bench-stack.js'))) as typeof here;

const load = (target: here.LoadTarget, durationSec: number): ReturnType<typeof runLoad> =>
  runLoad({ target, path: '/loadtest/get', connections, durationSec, ratePerSec: rate, timeoutSec: 10 });

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const backend = await here.startBackendService();
const started = [backend];
try {
  const builds = [
    { name: 'other', stack: other },
    { name: 'this', stack: here },
  ] as const;
  const order = process.env.AB_FIRST === 'this' ? [builds[1], builds[0]] : builds;
  const sides = [];
  for (const [i, build] of order.entries()) {
    const edge = await build.stack.startEdgeService();
    started.push(edge);
    const agent = await build.stack.startAgentService(backend.readyValue, edge.readyValue, `ab-${i}`);
    started.push(agent);
    sides.push({ name: build.name, edge, agent, target: here.targetOf(agent.readyValue) });
  }
  await Promise.all(sides.map((side) => load(side.target, 3))); // warm-up, discarded
  if (sides[0]!.name === 'this') sides.reverse(); // reported as other, this whatever the start order
  const totals: number[][] = [[], []];
  const ratios: number[] = [];
  const edgeRatios: number[] = [];
  const agentRatios: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const meters = sides.map((side) => [meterProcess(side.edge.pid), meterProcess(side.agent.pid)] as const);
    const results = await Promise.all(sides.map((side) => load(side.target, duration)));
    const line: string[] = [];
    const perSide: { edge: number; agent: number }[] = [];
    for (const [i, [edgeMeter, agentMeter]] of meters.entries()) {
      const ok = Math.max(1, results[i]!.outcomes.ok);
      const edgeUs = ((edgeMeter.stop()?.cpuMs ?? 0) * 1000) / ok;
      const agentUs = ((agentMeter.stop()?.cpuMs ?? 0) * 1000) / ok;
      totals[i]!.push(edgeUs + agentUs);
      perSide.push({ edge: edgeUs, agent: agentUs });
      line.push(
        `${sides[i]!.name}: ${(edgeUs + agentUs).toFixed(1)} µs (${edgeUs.toFixed(1)} + ${agentUs.toFixed(1)}), ${ok} ok`,
      );
    }
    ratios.push(totals[1]![round - 1]! / totals[0]![round - 1]!);
    edgeRatios.push(perSide[1]!.edge / perSide[0]!.edge);
    agentRatios.push(perSide[1]!.agent / perSide[0]!.agent);
    process.stdout.write(`round ${round}: ${line.join(' | ')}; this ÷ other ${ratios.at(-1)!.toFixed(3)}\n`);
  }
  process.stdout.write(
    `median: other ${median(totals[0]!).toFixed(1)} µs, this ${median(totals[1]!).toFixed(1)} µs, ratio ` +
      `${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); edge ` +
      `${median(edgeRatios).toFixed(3)}, agent ${median(agentRatios).toFixed(3)}\n`,
  );
} finally {
  for (const service of started.reverse()) await service.stop();
}
