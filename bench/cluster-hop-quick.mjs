// Quick same-node vs cross-node comparison: 2,000 sequential keep-alive GETs each way, one process
// (two edges sharing a memory registry, one agent on B, one backend). CPU is the whole process's.
// Run: pnpm exec tsc -b && node --conditions=development bench/cluster-hop-quick.mjs  (from the repo root)
import { Agent, request } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';
import { connect } from '../packages/cli/dist/index.js';

const silent = pino({ level: 'silent' });
const secret = 'x'.repeat(32);
const a = buildEdge({ port: 0, logger: silent, nodeId: 'a', cluster: { secret } });
const b = buildEdge({
  port: 0,
  logger: silent,
  nodeId: 'b',
  registry: a.options.registry,
  cluster: { secret },
});
const pa = (await a.listen()).port;
const pb = (await b.listen()).port;
const backend = await createTestBackend();
const tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'bench' });
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
const get = (port) =>
  new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/loadtest/ping', agent, headers: { host: 'bench.localhost' } },
      (res) => {
        res.resume();
        res.on('end', resolve);
      },
    );
    req.on('error', reject);
    req.end();
  });
async function run(port, n) {
  for (let i = 0; i < 200; i++) await get(port);
  const times = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await get(port);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  times.sort((x, y) => x - y);
  const q = (p) => times[Math.floor(p * (times.length - 1))].toFixed(3);
  return { p50: q(0.5), p99: q(0.99), cpuUsPerReq: ((cpu.user + cpu.system) / n).toFixed(0) };
}
console.log('same-node ', await run(pb, 2000));
console.log('cross-node', await run(pa, 2000));
agent.destroy();
await tunnel.close(0);
await b.close(0);
await a.close(0);
await backend.close();
