// Issue #32's unary target alone: the two fixed-rate rows of `pnpm bench grpc` (HTTP/1.1 through the tunnel,
// autocannon; unary gRPC calls through the tunnel, grpc-js) on one stack, the edge's and the agent's CPU per
// call from /proc, and their ratio. Quicker than the whole scenario (no direct, closed-loop or bidi rows),
// and each row can run alone, so a profile (TUNNEL2_BENCH_NODE_OPTIONS) holds one kind of traffic.
//   node bench/scripts/grpc-unary-cost.ts [both|h1|grpc] [seconds=8] [rate=500] [warmup=2]
// Build first (`pnpm exec tsc -b`). For an A/B, run it from two worktrees in turn.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { autocannonRowLoad } from '../dist/measure/autocannon-row-load.js';
import { readCpuMs } from '../dist/measure/process-stats.js';
import type { RowLoad } from '../dist/measure/side-by-side-rows.js';
import { jsonEvent, startAgentService, startBenchStack, targetOf } from '../dist/stacks/bench-stack.js';
import { startChildService } from '../dist/stacks/child-service.js';

const [rows = 'both', secondsArg = '8', rateArg = '500', warmupArg = '2'] = process.argv.slice(2);
const seconds = Number(secondsArg);
const rate = Number(rateArg);
const warmup = Number(warmupArg);
const processBin = (file: string): string =>
  fileURLToPath(new URL(`../dist/processes/${file}`, import.meta.url));

const bench = await startBenchStack({ tunnel: true, subdomain: 'bench-h1' });
const grpcServer = await startChildService({
  name: 'gRPC server (grpc-js)',
  args: [processBin('grpc-service-process.js')],
  ready: (line) => {
    const url = jsonEvent(line, 'listening')?.url;
    return typeof url === 'string' ? url : undefined;
  },
});
const edgeUrl = bench.edge?.readyValue ?? '';
const grpcAgent = await startAgentService(grpcServer.readyValue, edgeUrl, 'bench-grpc', undefined, false, [
  '--h2c',
]);
const grpcTunnel = targetOf(grpcAgent.readyValue);

function grpcCalls(durationSec: number): Promise<RowLoad> {
  const spec = {
    mode: 'unary-rate',
    address: new URL(grpcTunnel.origin).host,
    authority: grpcTunnel.host,
    durationSec,
    ratePerSec: rate,
    concurrency: 50,
    messageBytes: 400,
    timeoutSec: 10,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [processBin('grpc-client-process.js'), JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.once('exit', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as RowLoad);
      } catch (err) {
        reject(err);
      }
    });
  });
}

const h1Requests = (durationSec: number): Promise<RowLoad> =>
  autocannonRowLoad({
    target: bench.tunnel!,
    path: '/loadtest/get',
    connections: Math.max(1, Math.ceil(rate / 100)),
    durationSec,
    ratePerSec: rate,
    timeoutSec: 10,
  });

async function row(label: string, agentPid: number, load: (s: number) => Promise<RowLoad>): Promise<number> {
  if (warmup > 0) await load(warmup);
  const edgePid = bench.edge?.pid ?? 0;
  const before = [readCpuMs(edgePid) ?? 0, readCpuMs(agentPid) ?? 0];
  const result = await load(seconds);
  const [edge, agent] = [readCpuMs(edgePid) ?? 0, readCpuMs(agentPid) ?? 0].map(
    (ms, i) => ((ms - (before[i] ?? 0)) * 1000) / Math.max(1, result.ok),
  ) as [number, number];
  const errors = Object.values(result.errors).reduce((sum, n) => sum + n, 0);
  console.log(
    `${label}: ${result.ok} ok, ${errors} errors; edge ${edge.toFixed(1)} + agent ${agent.toFixed(1)} = ${(edge + agent).toFixed(1)} µs per call`,
  );
  return edge + agent;
}

try {
  const h1 = rows === 'grpc' ? undefined : await row('http/1.1 tunnel', bench.agent?.pid ?? 0, h1Requests);
  const grpc = rows === 'h1' ? undefined : await row('grpc unary tunnel', grpcAgent.pid, grpcCalls);
  if (h1 !== undefined && grpc !== undefined)
    console.log(`ratio grpc / http/1.1: ${(grpc / h1).toFixed(2)}×`);
} finally {
  await grpcAgent.stop();
  await grpcServer.stop();
  await bench.close();
}
