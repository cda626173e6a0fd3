// The inspector's cost on the agent, with both agents loaded at the same time: one edge and one backend, an
// agent with its inspector on and one with it off, each sent the same fixed rate at once, so whatever else
// the machine is doing falls on both alike (the `--inspect both` legs run one after the other instead).
//   node bench/scripts/inspect-concurrent.ts [rounds=5] [rate=1000] [duration=10] [connections=rate/10]
// Prints each round's agent CPU per request (from /proc) on and off, their ratio, and the medians. Build first.
// INSPECT_CONCURRENT_CONTROL=1: both agents with the inspector off (an A/A run: the bias of the method itself).

import { runLoad } from '../dist/measure/load-runner.js';
import { readCpuMs } from '../dist/measure/process-stats.js';
import { type LoadTarget, startAgentService, startBenchStack, targetOf } from '../dist/stacks/bench-stack.js';

const [rounds = 5, rate = 1000, duration = 10, connectionsArg] = process.argv.slice(2).map(Number);
const connections = connectionsArg ?? Math.max(1, Math.ceil(rate / 10));

function load(target: LoadTarget, durationSec: number): ReturnType<typeof runLoad> {
  return runLoad({
    target,
    path: '/loadtest/get',
    connections,
    durationSec,
    ratePerSec: rate,
    timeoutSec: 10,
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const control = process.env.INSPECT_CONCURRENT_CONTROL === '1';
const stack = await startBenchStack({
  tunnel: true,
  subdomain: 'inspect-concurrent',
  inspect: control ? 'off' : 'both',
});
const second = control
  ? await startAgentService(stack.backend.readyValue, stack.edge!.readyValue, 'inspect-concurrent-b', false)
  : undefined;
try {
  const on =
    second === undefined
      ? { agent: stack.agent!, target: stack.tunnel! }
      : { agent: second, target: targetOf(second.readyValue) };
  const off =
    second === undefined
      ? { agent: stack.agentInspectorOff!, target: stack.tunnelInspectorOff! }
      : { agent: stack.agent!, target: stack.tunnel! };
  await Promise.all([load(on.target, 3), load(off.target, 3)]); // warm-up, discarded
  const ratios: number[] = [];
  const perRequest: Record<'on' | 'off', number[]> = { on: [], off: [] };
  for (let round = 1; round <= rounds; round++) {
    const before = { on: readCpuMs(on.agent.pid) ?? 0, off: readCpuMs(off.agent.pid) ?? 0 };
    const [onResult, offResult] = await Promise.all([load(on.target, duration), load(off.target, duration)]);
    const us = (cpuMs: number, ok: number): number => (cpuMs * 1000) / Math.max(1, ok);
    const onUs = us((readCpuMs(on.agent.pid) ?? 0) - before.on, onResult.outcomes.ok);
    const offUs = us((readCpuMs(off.agent.pid) ?? 0) - before.off, offResult.outcomes.ok);
    perRequest.on.push(onUs);
    perRequest.off.push(offUs);
    ratios.push(onUs / offUs);
    process.stdout.write(
      `round ${round}: agent CPU/request on ${onUs.toFixed(1)} µs (${onResult.outcomes.ok} ok), ` +
        `off ${offUs.toFixed(1)} µs (${offResult.outcomes.ok} ok), on ÷ off ${(onUs / offUs).toFixed(3)}\n`,
    );
  }
  process.stdout.write(
    `median: on ${median(perRequest.on).toFixed(1)} µs, off ${median(perRequest.off).toFixed(1)} µs, ` +
      `on ÷ off ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})\n`,
  );
} finally {
  await second?.stop();
  await stack.close();
}
