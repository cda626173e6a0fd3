// What a request costs each process when the processes sat idle before it (issue #19, target 3 at 20 RPS):
// one keep-alive client sends small requests one at a time with a gap between them, through the tunnel and
// directly, and reads every process's CPU from /proc. The stack is the bench's own (backend, edge, agent).
//   node bench/scripts/idle-gap-cost.ts [requests=200] [gaps=50,5,0]
// Each gap is preceded by 500 requests without one (warm JIT). Build first (`pnpm exec tsc -b`).
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { readCpuMs } from '../dist/measure/process-stats.js';
import { type LoadTarget, startBenchStack } from '../dist/stacks/bench-stack.js';

const [countArg, gapsArg] = process.argv.slice(2);
const count = Number(countArg ?? 200);
const gaps = (gapsArg ?? '50,5,0').split(',').map(Number);

/** Latencies in ms of `n` GETs sent one after another on one connection, `gapMs` apart. */
async function paced(target: LoadTarget, n: number, gapMs: number): Promise<number[]> {
  const url = new URL(target.origin);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const start = performance.now();
      await new Promise<void>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: '/loadtest/ping',
            headers: { host: target.host },
            agent,
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve());
          },
        );
        req.on('error', reject);
        req.end();
      });
      latencies.push(performance.now() - start);
      if (gapMs > 0) await sleep(gapMs);
    }
  } finally {
    agent.destroy();
  }
  return latencies.sort((a, b) => a - b);
}

const at = (sorted: number[], q: number): string =>
  (sorted[Math.floor(q * (sorted.length - 1))] ?? 0).toFixed(2);
const cpu = (pid: number | undefined): number => (pid === undefined ? 0 : (readCpuMs(pid) ?? 0));

const stack = await startBenchStack({ tunnel: true, subdomain: 'gap' });
try {
  const tunnel = stack.tunnel!;
  await paced(tunnel, 500, 0);
  await paced(stack.direct, 500, 0);
  console.log('| gap | side | p50 ms | p90 ms | edge µs/req | agent µs/req | backend µs/req |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const gap of gaps) {
    for (const side of ['tunnel', 'direct'] as const) {
      const pids = [stack.edge?.pid, stack.agent?.pid, stack.backend.pid];
      const before = pids.map(cpu);
      const latencies = await paced(side === 'tunnel' ? tunnel : stack.direct, count, gap);
      const perRequest = pids.map((pid, i) => (((cpu(pid) - (before[i] ?? 0)) * 1000) / count).toFixed(0));
      const [edge, agent, backend] = side === 'tunnel' ? perRequest : ['–', '–', perRequest[2]];
      console.log(
        `| ${gap} ms | ${side} | ${at(latencies, 0.5)} | ${at(latencies, 0.9)} | ${edge} | ${agent} | ${backend} |`,
      );
    }
  }
} finally {
  await stack.close();
}
