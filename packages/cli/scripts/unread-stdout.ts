// The agent's memory while nothing reads its stdout (issue #29, 8): a real edge and backend in this process,
// the agent's bin with `--json` and a stdout pipe this script stops reading after the ready line, and
// `requests` GETs through the tunnel (16 at a time, kept alive). Prints the agent's RSS every 10,000
// requests, then reads stdout again and counts request lines and `dropped` events (they add up to the
// requests). Build first (`pnpm exec tsc -b`).
//   node packages/cli/scripts/unread-stdout.ts [requests=150000] [bin=packages/cli/bin/tunnel2.js]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';

const total = Number(process.argv[2] ?? 150_000);
const bin = process.argv[3] ?? fileURLToPath(new URL('../bin/tunnel2.js', import.meta.url));

const backend = await createTestBackend();
const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
const { port } = await edge.listen();
const agent = spawn(
  process.execPath,
  [bin, 'http', String(backend.port), '--server', edge.url, '--subdomain', 'unread', '--json'],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
// Whatever happens to this script, the agent goes with it (it would outlive a reader that died: issue #29, 7).
process.on('exit', () => agent.kill('SIGKILL'));
const stdout = agent.stdout!;
await once(stdout, 'data');
stdout.pause();

const rssMb = (): number => {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${agent.pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb) / 1024);
};
const keepAlive = new Agent({ keepAlive: true, maxSockets: 16 });
const get = (): Promise<number | undefined> =>
  new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/loadtest/ping',
        headers: { host: `unread.localhost:${port}` },
        agent: keepAlive,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      },
    );
    req.on('error', reject);
    req.end();
  });

let sent = 0;
let failed = 0;
const samples = [`0: ${rssMb()} MB`];
const client = async (): Promise<void> => {
  while (sent < total) {
    const n = ++sent;
    if ((await get()) !== 200) failed++;
    if (n % 10_000 === 0) samples.push(`${n}: ${rssMb()} MB`);
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: 16 }, client));
const seconds = ((performance.now() - started) / 1000).toFixed(1);
console.log(`${total} requests in ${seconds} s, ${failed} not 200; agent RSS after n requests:`);
console.log(`  ${samples.join(', ')}`);

// Read again: what was held comes out, then one `dropped` event for what was not.
let text = '';
stdout.on('data', (chunk: Buffer) => {
  text += chunk.toString();
});
stdout.resume();
const counted = (): { lines: number; dropped: number } => {
  const events = text
    .split('\n')
    .slice(0, -1) // the last one is not complete yet
    .map((line) => JSON.parse(line) as { event: string; count?: number });
  return {
    lines: events.filter((e) => e.event === 'request').length,
    dropped: events.reduce((n, e) => n + (e.event === 'dropped' ? (e.count ?? 0) : 0), 0),
  };
};
// Until every request is accounted for, or stdout stays silent for 5 s.
while (counted().lines + counted().dropped < total) {
  const silent = sleep(5_000, 'silent');
  if ((await Promise.race([once(stdout, 'data'), silent])) === 'silent') break;
}
const { lines, dropped } = counted();
console.log(`request lines written: ${lines}, dropped (said in \`dropped\` events): ${dropped}`);
agent.kill('SIGKILL');
keepAlive.destroy();
await edge.close(0);
await backend.close();
