// The tunnel's latency and the agent's memory while its inspector is abused (issue #29, defect 4): an edge,
// the test backend and an agent with its inspector on; the store filled with 1 MiB exchanges (the budget's
// worth) and capture paused so they stay, then the same fixed rate through the tunnel alternately without and with abusers: 16 HAR exports
// and 8 body searches in a loop (each asking again as soon as it is answered, a 503 after its Retry-After),
// and 32 event streams half of them cross-site. The abusers run in a child process, so their reading does
// not slow the load generator.
//   node bench/scripts/inspect-abuse.ts [rounds=3] [rate=200] [duration=10] [mix=all|har|search]
// `mix`: har or search runs only that kind of loop (search: 8 loops; to tell the CPU of moving exports'
// bytes from the work on the agent's loop).
// Prints per round the tunnel's p50/p99 (corrected for coordinated omission) with and without abuse, the
// agent's RSS before and its peak during the abuse (VmHWM), and what the abusers were answered. Build first.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { runLoad } from '../dist/measure/load-runner.js';
import { meterProcess, readStatusKb } from '../dist/measure/process-stats.js';
import { runtime } from '../dist/runtime-paths.js';
import {
  benchNodeFlags,
  jsonEvent,
  startBackendService,
  startEdgeService,
  targetOf,
} from '../dist/stacks/bench-stack.js';
import { startChildService } from '../dist/stacks/child-service.js';

const MiB = 1024 * 1024;

/** Child mode: abuse the inspector at argv[3] until stdin closes, then print what it was answered. */
async function abuse(inspectorUrl: string, mix: string): Promise<void> {
  const answers = new Map<string, number>();
  let running = true;
  process.stdin.on('close', () => {
    running = false;
  });
  process.stdin.resume();
  const count = (key: string): void => {
    answers.set(key, (answers.get(key) ?? 0) + 1);
  };
  const get = (path: string, headers: Record<string, string> = {}): Promise<number> =>
    new Promise((resolve) => {
      const req = request(`${inspectorUrl}${path}`, { headers, agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(0));
      });
      req.on('error', () => resolve(0));
      req.end();
    });
  const loop = async (name: string, path: string): Promise<void> => {
    while (running) {
      const status = await get(path);
      count(`${name} ${status}`);
      if (status === 503) await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  const streams = Array.from({ length: 32 }, (_, i) =>
    request(`${inspectorUrl}/api/events`, {
      agent: false,
      headers: i % 2 === 0 ? { 'sec-fetch-site': 'cross-site' } : {},
    })
      .on('response', (res) => {
        count(`events ${res.statusCode}`);
        res.resume();
      })
      .on('error', () => {})
      .end(),
  );
  await Promise.all([
    ...Array.from({ length: mix === 'search' ? 0 : 16 }, () => loop('har', '/api/har')),
    ...Array.from({ length: mix === 'har' ? 0 : 8 }, () =>
      loop('search', '/api/entries?body=needle-nowhere&limit=1000'),
    ),
  ]);
  for (const stream of streams) stream.destroy();
  process.stdout.write(`${JSON.stringify(Object.fromEntries(answers))}\n`);
}

if (process.argv[2] === 'abuser') {
  await abuse(process.argv[3]!, process.argv[4] ?? 'all');
  process.exit(0);
}

const [rounds = 3, rate = 200, duration = 10] = process.argv.slice(2, 5).map(Number);
const mix = process.argv[5] ?? 'all';
if (!['all', 'har', 'search'].includes(mix)) throw new Error(`mix: all, har or search, not "${mix}"`);
const backend = await startBackendService();
const edge = await startEdgeService();
const agent = await startChildService({
  name: 'agent (tunnel2 http)',
  args: [
    ...benchNodeFlags(),
    runtime.cliBin(),
    'http',
    backend.readyValue,
    '--server',
    edge.readyValue,
    '--subdomain',
    'inspect-abuse',
    '--json',
    '--log-level',
    'warn',
    '--inspect',
    '127.0.0.1:0',
  ],
  ready: (line) => {
    const ready = jsonEvent(line, 'ready');
    return ready === undefined ? undefined : JSON.stringify(ready);
  },
});
const { url: tunnelUrl, inspectorUrl } = JSON.parse(agent.readyValue) as {
  url: string;
  inspectorUrl: string;
};
const target = targetOf(tunnelUrl);

try {
  // The store's 64 MiB budget filled: 1 MiB each way (/loadtest/echo answers what it is sent).
  const body = Buffer.alloc(MiB, 'lorem ipsum café ');
  for (let i = 0; i < 40; i++) {
    // node:http, not fetch: fetch does not let a Host be set (the edge routes by it).
    await new Promise<void>((resolve, reject) => {
      const req = request(`${target.origin}/loadtest/echo`, {
        method: 'POST',
        headers: { host: target.host, 'content-type': 'text/plain' },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  // Capture paused: the load's own small exchanges would otherwise evict the 1 MiB ones within seconds,
  // and every export and search must read the whole full store.
  await fetch(`${inspectorUrl}/api/capture`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"paused":true}',
  });
  const status = (await (await fetch(`${inspectorUrl}/api/status`)).json()) as {
    count: number;
    bytes: number;
  };
  console.log(`store: ${status.count} entries, ${(status.bytes / MiB).toFixed(1)} MiB`);
  const load = () =>
    runLoad({
      target,
      path: '/loadtest/get',
      connections: 20,
      durationSec: duration,
      ratePerSec: rate,
      timeoutSec: 10,
    });
  await load(); // warm-up, discarded
  const ms = (v: number): string => v.toFixed(1).padStart(7);
  console.log(
    'round | side   |  p50 ms |  p90 ms |  p99 ms | errors | agent RSS MiB (before → peak) | abusers answered',
  );
  const ratios: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const quiet = await load();
    const rssBefore = (readStatusKb(agent.pid, 'VmRSS') ?? 0) / 1024;
    const meter = meterProcess(agent.pid);
    const abuser = spawn(process.execPath, [import.meta.filename, 'abuser', inspectorUrl, mix], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let report = '';
    abuser.stdout.setEncoding('utf8');
    abuser.stdout.on('data', (text: string) => {
      report += text;
    });
    const loaded = await load();
    abuser.stdin.end();
    await once(abuser, 'exit');
    const peak = meter.stop()?.peakRssMb ?? 0;
    const errors = (r: typeof quiet): number => r.outcomes.errorCount();
    console.log(
      `${String(round).padStart(5)} | quiet  | ${ms(quiet.correctedLatency.p50)} | ${ms(quiet.correctedLatency.p90)} | ${ms(quiet.correctedLatency.p99)} | ${String(errors(quiet)).padStart(6)} |`,
    );
    console.log(
      `${String(round).padStart(5)} | abused | ${ms(loaded.correctedLatency.p50)} | ${ms(loaded.correctedLatency.p90)} | ${ms(loaded.correctedLatency.p99)} | ${String(errors(loaded)).padStart(6)} | ${rssBefore.toFixed(0)} → ${peak.toFixed(0)} | ${report.trim()}`,
    );
    ratios.push(loaded.correctedLatency.p99 / quiet.correctedLatency.p99);
  }
  console.log(`p99 abused ÷ quiet per round: ${ratios.map((r) => r.toFixed(2)).join(', ')}`);
} finally {
  await agent.stop();
  await edge.stop();
  await backend.stop();
}
