// What TLS at the edge costs the edge's process: CPU per request to its landing page over plain HTTP/1.1 and
// over TLS (keep-alive, 10 connections), and per request with a new TLS connection each (a handshake each,
// EC P-256). The edge runs as `tunnel2-edge` in its own process; its CPU is read from /proc. Loopback only,
// bounded. Build first (`pnpm exec tsc -b`).
//   node packages/edge/scripts/tls-cost.ts
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { makeTestCa } from '../../test-services/dist/index.js';

const ca = await makeTestCa();
const pair = await ca.issue('edge', ['localhost']);
const bin = new URL('../bin/tunnel2-edge.js', import.meta.url).pathname;

/** User + system CPU of a process, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function measure(label: string, tls: boolean, keepAlive: boolean, requests: number): Promise<void> {
  const args = ['--port', '0', '--json', '--log-level', 'warn'];
  if (tls) args.push('--tls-cert', pair.certFile, '--tls-key', pair.keyFile);
  const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve) =>
    child.stdout.once('data', (data: Buffer) => resolve(JSON.parse(String(data).split('\n')[0]!).url)),
  );
  const port = Number(new URL(url).port);
  const client = tls ? https : http;
  const agent = new client.Agent({ keepAlive, maxSockets: 10 });
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = client.request(
        {
          host: '127.0.0.1',
          port,
          path: '/',
          agent,
          servername: 'localhost',
          ca: ca.ca.cert,
          headers: { host: 'localhost' },
        },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end();
    });
  for (let i = 0; i < 200; i++) await one();
  const cpu0 = cpuMs(child.pid!);
  const started = performance.now();
  let sent = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (sent < requests) {
        sent++;
        await one();
      }
    }),
  );
  const elapsed = performance.now() - started;
  const used = cpuMs(child.pid!) - cpu0;
  console.log(
    `${label}: ${requests} requests, edge CPU ${used} ms = ${((used * 1000) / requests).toFixed(1)} µs/request, ${Math.round((requests / elapsed) * 1000)} req/s`,
  );
  agent.destroy();
  child.kill('SIGKILL');
}

await measure('plain HTTP/1.1, keep-alive', false, true, 20_000);
await measure('TLS at the edge, keep-alive', true, true, 20_000);
await measure('TLS at the edge, a new connection each', true, false, 2_000);
await ca.dispose();
