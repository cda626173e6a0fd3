// What a new public connection costs `tunnel2 server --workers 2` (SO_REUSEPORT vs node:cluster's
// round-robin): requests each on a connection of its own (agent: false), 20 at a time, to a name no agent
// holds (a 404 from the worker that takes it, so only the accept path and HTTP parsing are measured), and
// the CPU of the primary and of the workers from /proc, per connection.
//   node bench/scripts/worker-connection-cost.ts [connections=4000]
// Build first (`pnpm exec tsc -b`). On Linux the workers use SO_REUSEPORT; round-robin is what they use
// where the OS does not balance it (workers/reuse-port.ts).
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { get } from 'node:http';
import { fileURLToPath } from 'node:url';

const total = Number(process.argv[2] ?? 4000);
const CONCURRENCY = 20;
const bin = fileURLToPath(new URL('../../packages/cli/bin/tunnel2.js', import.meta.url));

/** utime + stime of a process in µs (/proc/<pid>/stat, USER_HZ = 100). */
function cpuUs(pid: number): number {
  const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

const edge = spawn(
  process.execPath,
  [bin, 'server', '--workers', '2', '--port', '0', '--json', '--log-level', 'warn'],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const url = await new Promise<string>((resolve) => {
  let text = '';
  edge.stdout.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    const match = /"url":"([^"]+)"/.exec(text);
    if (match?.[1] !== undefined) resolve(match[1]);
  });
});
const port = Number(new URL(url).port);
const workers = execFileSync('pgrep', ['-P', String(edge.pid)], { encoding: 'utf8' })
  .trim()
  .split('\n')
  .map(Number);

const once = (): Promise<void> =>
  new Promise((resolve, reject) => {
    get(
      { port, host: '127.0.0.1', path: '/', headers: { host: 'nobody.localhost' }, agent: false },
      (res) => {
        res.resume();
        res.on('end', resolve);
      },
    ).on('error', reject);
  });
async function run(n: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < n) await once();
    }),
  );
}

try {
  await run(500); // warm JIT, discarded
  const primary0 = cpuUs(edge.pid ?? 0);
  const workers0 = workers.map(cpuUs);
  const start = performance.now();
  await run(total);
  const seconds = (performance.now() - start) / 1000;
  const primary = cpuUs(edge.pid ?? 0) - primary0;
  const split = workers.map((pid, i) => cpuUs(pid) - (workers0[i] ?? 0));
  console.log(
    JSON.stringify({
      connections: total,
      perSecond: Math.round(total / seconds),
      primaryUsPerConnection: Number((primary / total).toFixed(1)),
      workersUsPerConnection: Number((split.reduce((a, b) => a + b, 0) / total).toFixed(1)),
      workerCpuUs: split,
    }),
  );
} finally {
  edge.kill('SIGKILL');
  for (const pid of workers) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone with the primary
    }
  }
}
