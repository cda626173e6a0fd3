// Where the tunnel's CPU per request goes beside the HTTP floor's (issue #34): one backend; the tunnel (an
// edge and an agent, through their real command lines) and the HTTP floor's pair (http-relay-floor-process)
// each run a closed loop at 100 connections in turn, every process under `--cpu-prof`; then each profile's
// self time is summed by function and by group (ours per package, undici, ws, node:*, the collector, native
// calls such as the write syscalls) and divided by the requests that process answered, warm-up included.
//   node bench/scripts/closed-loop-profile.ts [duration=12] [warmup=4] [dir=/tmp/closed-loop-profile] [top=30]
// Sampling at 250 µs slows every process: read the figures side by side, not as absolute costs. The agent
// runs on its main thread (with TUNNEL2_WORKER=1 in its worker, whose profile is its own file). Build first.
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from '../dist/measure/load-runner.js';
import {
  jsonEvent,
  type LoadTarget,
  startAgentService,
  startBackendService,
  startEdgeService,
  targetOf,
} from '../dist/stacks/bench-stack.js';
import { type ChildService, startChildService } from '../dist/stacks/child-service.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const duration = Number(args[0] ?? 12);
const warmup = Number(args[1] ?? 4);
const dir = args[2] ?? '/tmp/closed-loop-profile';
const top = Number(args[3] ?? 30);
const relayBin = fileURLToPath(new URL('../dist/processes/http-relay-floor-process.js', import.meta.url));
// The relay's halves have no SIGTERM handler: without one they would die without writing their profile.
const exitOnTerm = `data:text/javascript,process.on('SIGTERM',()=>process.exit(0))`;
const profFlags = (side: string): string[] => [
  '--cpu-prof',
  `--cpu-prof-dir=${join(dir, side)}`,
  '--cpu-prof-interval',
  '250',
];
const listening = (line: string): string | undefined => {
  const url = jsonEvent(line, 'listening')?.url;
  return typeof url === 'string' ? url : undefined;
};

function group(url: string, name: string): string {
  if (url === '') return name.startsWith('(') ? name : `native ${name}`;
  for (const part of ['protocol', 'edge', 'cli', 'inspector']) {
    if (url.includes(`packages/${part}/`)) return `ours: ${part}`;
  }
  for (const dep of ['undici', 'ws', 'pino', 'prom-client']) if (url.includes(`/${dep}/`)) return dep;
  if (url.includes('/bench/')) return 'bench (the floor relay)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/').slice(0, 2).join('/')}`;
  return url.split('/').slice(-2).join('/');
}

function summarize(file: string, requests: number): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  }
  const byFunction = new Map<string, number>();
  const byGroup = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const us = self.get(node.id) ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    if (us === 0 || functionName === '(idle)') continue;
    busy += us;
    const name = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(packages|node_modules)\//, '$1/')}:${lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const g = group(url, functionName);
    byGroup.set(g, (byGroup.get(g) ?? 0) + us);
  }
  const rows = (map: Map<string, number>, n: number): string =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(
        ([name, us]) =>
          `${(us / requests).toFixed(2).padStart(8)} µs ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${name}`,
      )
      .join('\n');
  return (
    `${file}: ${(busy / requests).toFixed(1)} µs of samples per request (${requests} requests)\n` +
    `-- by group\n${rows(byGroup, 20)}\n-- by function\n${rows(byFunction, top)}\n`
  );
}

rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const backend = await startBackendService();
const started: ChildService[] = [backend];
const answered = new Map<string, number>();
try {
  for (const side of ['tunnel', 'http-relay'] as const) {
    const stack: ChildService[] = [];
    let target: LoadTarget;
    if (side === 'tunnel') {
      process.env.TUNNEL2_BENCH_NODE_OPTIONS = profFlags(side).join(' ');
      const edge = await startEdgeService();
      stack.push(edge);
      stack.push(await startAgentService(backend.readyValue, edge.readyValue, 'profile'));
      process.env.TUNNEL2_BENCH_NODE_OPTIONS = '';
      target = targetOf(stack[1]!.readyValue);
    } else {
      const flags = [...profFlags(side), '--import', exitOnTerm, relayBin];
      const agent = await startChildService({
        name: 'http relay agent',
        args: [...flags, '--role', 'agent', '--backend', backend.readyValue],
        ready: listening,
      });
      stack.push(agent);
      const edge = await startChildService({
        name: 'http relay edge',
        args: [...flags, '--role', 'edge', '--upstream', agent.readyValue],
        ready: listening,
      });
      stack.push(edge);
      target = { ...targetOf(edge.readyValue), host: new URL(backend.readyValue).host };
    }
    started.push(...stack);
    let ok = 0;
    for (const seconds of [warmup, duration]) {
      const load = await runLoad({
        target,
        path: '/loadtest/get',
        connections: 100,
        durationSec: seconds,
        ratePerSec: undefined,
        timeoutSec: 10,
      });
      ok += load.outcomes.ok;
    }
    answered.set(side, ok);
    process.stdout.write(`${side}: ${ok} requests answered\n`);
    for (const service of stack.reverse()) await service.stop();
    started.splice(started.length - stack.length);
  }
} finally {
  for (const service of started.reverse()) await service.stop();
}
for (const [side, ok] of answered) {
  for (const file of readdirSync(join(dir, side)).sort()) {
    process.stdout.write(`\n[${side}] ${summarize(join(dir, side, file), ok)}`);
  }
}
