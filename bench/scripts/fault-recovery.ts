// Faults under load, end to end with real processes: what clients see while a fault lasts and how long until
// every tunnel answers again. docs/reliability.md "Faults under load" quotes its output.
//   node bench/scripts/fault-recovery.ts [--agents 20] [--rate 200] [--freeze 5,40] [--only edge-sigterm,...]
// Scenarios: edge-sigterm and edge-kill (the edge stopped, then started again on the same port at once),
// agent-freeze-<s> (one agent SIGSTOPped for s seconds, then SIGCONT), backend-kill (the backend killed -9 and
// started again 2 s later on the same port). Load is paced over every tunnel, round robin, on kept-alive
// connections, and goes on throughout. Each agent is a real `tunnel2 http` process (about 75 MB of RSS each):
// 200 agents need about 15 GB. Build first (`pnpm exec tsc -b`).
import { Agent as HttpAgent, type IncomingMessage, request } from 'node:http';
import { parseArgs } from 'node:util';
import { transportErrorKind } from '../dist/measure/outcome-counter.js';
import { runtime } from '../dist/runtime-paths.js';
import { startAgentService, startBackendService, targetOf } from '../dist/stacks/bench-stack.js';
import { type ChildService, startChildService } from '../dist/stacks/child-service.js';

const { values } = parseArgs({
  options: {
    agents: { type: 'string', default: '20' },
    rate: { type: 'string', default: '200' },
    freeze: { type: 'string', default: '5,40' },
    only: { type: 'string' },
    'recovery-limit': { type: 'string', default: '90' },
  },
});
const agentCount = Number(values.agents);
const rate = Number(values.rate);
const freezes = values.freeze.split(',').map(Number);
const recoveryLimitMs = Number(values['recovery-limit']) * 1000;
const REQUEST_TIMEOUT_MS = 30_000;

interface Outcome {
  tunnel: number;
  sentAt: number;
  doneAt: number;
  /** The HTTP status, or a transport error kind. */
  kind: string;
}

function startEdge(port: number): Promise<ChildService> {
  return startChildService({
    name: 'edge (tunnel2 server)',
    args: [
      runtime.cliBin(),
      'server',
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--json',
      '--log-level',
      'error',
      '--max-sessions-per-owner',
      String(Math.max(20, agentCount)),
    ],
    ready: (line) => {
      if (!line.startsWith('{')) return undefined;
      const parsed = JSON.parse(line) as { event?: string; url?: string };
      return parsed.event === 'listening' ? parsed.url : undefined;
    },
    startTimeoutMs: 30_000,
  });
}

function startBackend(port: number): Promise<ChildService> {
  return startChildService({
    name: 'test backend',
    args: [runtime.testBackendBin(), '--port', String(port), '--host', '127.0.0.1'],
    ready: (line) => (line.includes('listening on ') ? line : undefined),
  });
}

/** Waits until the process has exited (or is gone already). */
async function exited(service: ChildService): Promise<void> {
  while (service.alive()) await new Promise((resolve) => setTimeout(resolve, 20));
}

const backend0 = await startBackendService();
const backendPort = Number(new URL(backend0.readyValue).port);
let backend: ChildService = backend0;
let edge = await startEdge(0);
const edgePort = Number(new URL(edge.readyValue).port);
const agents: ChildService[] = [];
for (let i = 0; i < agentCount; i++) {
  agents.push(await startAgentService(backend0.readyValue, edge.readyValue, `fault-${i}`, false));
}
const targets = agents.map((agent) => targetOf(agent.readyValue));
// One pool per tunnel, as separate clients would have: a frozen tunnel's requests must not queue the others'.
const pools = targets.map(() => new HttpAgent({ keepAlive: true, maxSockets: 64 }));

function send(tunnel: number, onDone: (outcome: Outcome) => void): void {
  const target = targets[tunnel]!;
  const sentAt = performance.now();
  let done = false;
  const finish = (kind: string): void => {
    if (done) return;
    done = true;
    onDone({ tunnel, sentAt, doneAt: performance.now(), kind });
  };
  const req = request(
    `${target.origin}/loadtest/ping`,
    { headers: { host: target.host }, agent: pools[tunnel], timeout: REQUEST_TIMEOUT_MS },
    (res: IncomingMessage) => {
      const code = res.headers['x-tunnel2-error'];
      const kind = `${res.statusCode}${typeof code === 'string' ? ` ${code.replace('TUNNEL2_ERR_', '')}` : ''}`;
      res.on('error', () => finish(`${kind} then reset`));
      res.on('end', () => finish(kind));
      res.resume();
    },
  );
  req.on('timeout', () => {
    req.destroy();
    finish('timeout');
  });
  req.on('error', (err) => finish(transportErrorKind(err)));
  req.end();
}

/**
 * Paced load over every tunnel while `fault` runs; then waits until every tunnel (or the `watched` ones) has
 * answered 200 to a request sent after the fault ended.
 */
async function underLoad(
  fault: () => Promise<{ startedAt: number; endedAt: number }>,
  watched: number[],
): Promise<{ outcomes: Outcome[]; startedAt: number; endedAt: number; recoveredAt: number | undefined }> {
  const outcomes: Outcome[] = [];
  let next = 0;
  const interval = 1000 / rate;
  let due = performance.now();
  let running = true;
  let inFlight = 0;
  const pump = setInterval(() => {
    const now = performance.now();
    while (running && due <= now) {
      inFlight += 1;
      send(next, (outcome) => {
        inFlight -= 1;
        outcomes.push(outcome);
      });
      next = (next + 1) % targets.length;
      due += interval;
    }
  }, 5);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const { startedAt, endedAt } = await fault();
  let recoveredAt: number | undefined;
  while (performance.now() - endedAt < recoveryLimitMs) {
    const backAt = watched.map((tunnel) => {
      const first = outcomes.find((o) => o.tunnel === tunnel && o.sentAt >= endedAt && o.kind === '200');
      return first?.doneAt;
    });
    if (backAt.every((at) => at !== undefined)) {
      recoveredAt = Math.max(...(backAt as number[]));
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  running = false;
  clearInterval(pump);
  const drainUntil = performance.now() + REQUEST_TIMEOUT_MS + 1_000;
  while (inFlight > 0 && performance.now() < drainUntil)
    await new Promise((resolve) => setTimeout(resolve, 50));
  return { outcomes, startedAt, endedAt, recoveredAt };
}

function summarize(
  name: string,
  result: Awaited<ReturnType<typeof underLoad>>,
  scope: (outcome: Outcome) => boolean = () => true,
): void {
  const window = result.outcomes.filter(
    (o) =>
      scope(o) &&
      o.doneAt >= result.startedAt &&
      o.sentAt <= (result.recoveredAt ?? Number.POSITIVE_INFINITY),
  );
  const kinds = new Map<string, number>();
  for (const o of window) kinds.set(o.kind, (kinds.get(o.kind) ?? 0) + 1);
  const slowest = window.reduce((max, o) => Math.max(max, o.doneAt - o.sentAt), 0);
  const recovery =
    result.recoveredAt === undefined
      ? `not within ${recoveryLimitMs / 1000} s`
      : `${((result.recoveredAt - result.endedAt) / 1000).toFixed(2)} s after the fault ended`;
  const seen = [...kinds.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([kind, count]) => `${kind} ×${count}`)
    .join(', ');
  console.log(
    `| ${name} | ${((result.endedAt - result.startedAt) / 1000).toFixed(2)} s | ${seen} | ` +
      `${(slowest / 1000).toFixed(2)} s | ${recovery} |`,
  );
}

const everyTunnel = targets.map((_, i) => i);
const only = values.only === undefined ? undefined : new Set(values.only.split(','));
const wanted = (name: string): boolean => only === undefined || only.has(name);
console.log(`${agentCount} agents, ${rate} requests/s over their tunnels, round robin`);
console.log('| fault | lasted | what clients saw, fault start → all back | slowest answer | recovery |');
console.log('| --- | --- | --- | --- | --- |');
try {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    const name = signal === 'SIGTERM' ? 'edge-sigterm' : 'edge-kill';
    if (!wanted(name)) continue;
    const result = await underLoad(async () => {
      const startedAt = performance.now();
      process.kill(edge.pid, signal);
      await exited(edge);
      edge = await startEdge(edgePort);
      return { startedAt, endedAt: performance.now() };
    }, everyTunnel);
    summarize(`${name} (${agentCount} agents)`, result);
  }
  for (const seconds of freezes) {
    const name = `agent-freeze-${seconds}`;
    if (!wanted(name)) continue;
    const frozen = agents[0]!;
    const result = await underLoad(async () => {
      const startedAt = performance.now();
      process.kill(frozen.pid, 'SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      process.kill(frozen.pid, 'SIGCONT');
      return { startedAt, endedAt: performance.now() };
    }, [0]);
    summarize(`${name}: the frozen tunnel`, result, (o) => o.tunnel === 0);
    summarize(`${name}: the other tunnels`, result, (o) => o.tunnel !== 0);
  }
  if (wanted('backend-kill')) {
    const result = await underLoad(async () => {
      const startedAt = performance.now();
      backend.kill();
      await exited(backend);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      backend = await startBackend(backendPort);
      return { startedAt, endedAt: performance.now() };
    }, everyTunnel);
    summarize('backend-kill, restarted 2 s later', result);
  }
} finally {
  for (const pool of pools) pool.destroy();
  for (const agent of agents) agent.kill();
  edge.kill();
  backend.kill();
}
