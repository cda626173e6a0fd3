// The edge's memory while nothing reads its stderr (a frozen terminal, a stuck log shipper): the edge's bin
// at debug level (a log line per request) with a stderr pipe this script never reads, and `requests` GETs of
// the landing page (16 at a time, kept alive). Prints the edge's RSS every 10,000 requests, then reads
// stderr and counts request lines and the `dropped` counts (they add up to the requests). Build first
// (`pnpm exec tsc -b`).
//   node packages/edge/scripts/unread-stderr.ts [requests=100000] [bin=packages/edge/bin/tunnel2-edge.js]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';

const total = Number(process.argv[2] ?? 100_000);
const bin = process.argv[3] ?? fileURLToPath(new URL('../bin/tunnel2-edge.js', import.meta.url));

const edge = spawn(process.execPath, [bin, '--port', '0', '--json', '--log-level', 'debug'], {
  stdio: ['ignore', 'pipe', 'pipe'],
});
process.on('exit', () => edge.kill('SIGKILL'));
const stderr = edge.stderr!;
stderr.pause();
const [first] = (await once(edge.stdout!, 'data')) as [Buffer];
const port = Number(new URL((JSON.parse(first.toString().split('\n')[0]!) as { url: string }).url).port);

const rssMb = (): number => {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${edge.pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb) / 1024);
};
const keepAlive = new Agent({ keepAlive: true, maxSockets: 16 });
const get = (): Promise<number | undefined> =>
  new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: keepAlive }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  });

let sent = 0;
const samples = [`0: ${rssMb()} MB`];
const client = async (): Promise<void> => {
  while (sent < total) {
    const n = ++sent;
    await get();
    if (n % 10_000 === 0) samples.push(`${n}: ${rssMb()} MB`);
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: 16 }, client));
const seconds = ((performance.now() - started) / 1000).toFixed(1);
console.log(`${total} requests in ${seconds} s; edge RSS after n requests:`);
console.log(`  ${samples.join(', ')}`);

let text = '';
stderr.on('data', (chunk: Buffer) => {
  text += chunk.toString();
});
stderr.resume();
edge.kill('SIGTERM');
await once(edge, 'exit');
let lines = 0;
let dropped = 0;
for (const line of text.split('\n')) {
  if (line.includes('"msg":"request"')) lines++;
  const count = /"msg":"log lines dropped","dropped":(\d+)/.exec(line)?.[1];
  if (count !== undefined) dropped += Number(count);
}
console.log(`request lines written: ${lines}, dropped and counted: ${dropped}, sum: ${lines + dropped}`);
