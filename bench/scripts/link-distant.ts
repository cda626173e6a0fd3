// What a node link's stream windows cost between distant nodes: downloads of a few sizes across a link that
// holds every byte for half a round trip each way (bench/src/processes/delay-link.ts in front of the holder's node URL),
// one after the other, timed from the request to the last byte. Every process is its own: redis-server, two
// `tunnel2 server` nodes, the test backend and one agent (on the holder); the delay link runs here.
//   node bench/scripts/link-distant.ts [rttMs=20] [rounds=10]
// Bounded: rounds × 4 sizes, each request gives up after 30 s; loopback only. Build first (`pnpm exec tsc -b`).
import { request } from 'node:http';
import { freePort } from '@tunnel2/test-services';
import { createDelayLink } from '../dist/processes/delay-link.js';
import { startAgentService, startBackendService, startEdgeService } from '../dist/stacks/bench-stack.js';
import type { ChildService } from '../dist/stacks/child-service.js';
import { clusterNodeArgs } from '../dist/stacks/cluster-stack.js';
import { startRedisServer } from '../dist/stacks/redis-server.js';

const [rttArg, roundsArg] = process.argv.slice(2);
const rttMs = Number(rttArg ?? 20);
const rounds = Number(roundsArg ?? 10);
const SIZES = [16 * 1024, 256 * 1024, 1024 * 1024, 8 * 1024 * 1024];

/** One GET of `size` bytes through `port`; ms from the request to the last byte. */
function download(port: number, host: string, size: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = request({ host: '127.0.0.1', port, path: `/bytes/${size}`, headers: { host }, agent: false });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), 30_000);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      let length = 0;
      res.on('data', (chunk: Buffer) => (length += chunk.length));
      res.on('end', () => {
        clearTimeout(timer);
        if (res.statusCode === 200 && length === size) resolve(performance.now() - start);
        else reject(new Error(`status ${res.statusCode}, ${length} of ${size} bytes`));
      });
    });
    req.end();
  });
}

const median = (values: number[]): number => [...values].sort((x, y) => x - y)[values.length >> 1]!;

const services: ChildService[] = [];
const redis = await startRedisServer();
const [holderPort, ingressPort] = [await freePort(), await freePort()];
const delay = await createDelayLink({ target: { host: '127.0.0.1', port: holderPort }, rttMs });
try {
  const backend = await startBackendService();
  services.push(backend);
  // The holder announces the delay link as its node URL: the ingress's link to it crosses the delay.
  services.push(
    await startEdgeService([
      ...clusterNodeArgs(redis.url, 'node-0', holderPort),
      '--node-url',
      `http://127.0.0.1:${delay.port}`,
    ]),
  );
  services.push(await startEdgeService(clusterNodeArgs(redis.url, 'node-1', ingressPort)));
  const agent = await startAgentService(backend.readyValue, `http://127.0.0.1:${holderPort}`, 'far', false);
  services.push(agent);
  const host = new URL(agent.readyValue).hostname;
  // Opens the link (and lets its round-trip sampling run).
  for (let i = 0; i < 3; i++) await download(ingressPort, host, 1024);
  console.log(
    `link round trip ${rttMs} ms; ${rounds} downloads per size, one after the other; median ms (min–max)`,
  );
  for (const size of SIZES) {
    const times: number[] = [];
    for (let i = 0; i < rounds; i++) times.push(await download(ingressPort, host, size));
    const label = size >= 1024 * 1024 ? `${size / 1024 / 1024} MiB` : `${size / 1024} KiB`;
    console.log(
      `| ${label.padEnd(7)} | ${median(times).toFixed(0).padStart(5)} (${Math.min(...times).toFixed(0)}–${Math.max(...times).toFixed(0)}) |`,
    );
  }
} finally {
  for (const service of services.reverse()) await service.stop();
  await delay.close();
  await redis.stop();
}
