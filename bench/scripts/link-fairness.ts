// Issue #29's attack on a node link, measured: tunnels on the holder node serving endless downloads, many
// downloads of them through the other node (the ingress) by clients that never read, and a victim tunnel on
// the holder asked for 4 KiB at a time, one request after the other, through the ingress (across the link)
// and on the holder directly. Prints the victim's answers and latency percentiles before and under attack.
// Every process is its own: redis-server, two `tunnel2 server` nodes, the test backend, one agent per tunnel.
//   node bench/scripts/link-fairness.ts [hogs=7] [downloads=560] [seconds=5]
// Bounded: each victim round lasts `seconds`, each request gives up after 15 s, the attack's fill is waited
// for at most 60 s; everything is on loopback. Build first (`pnpm exec tsc -b`).
import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { freePort } from '@tunnel2/test-services';
import { startAgentService, startBackendService, startEdgeService } from '../dist/stacks/bench-stack.js';
import type { ChildService } from '../dist/stacks/child-service.js';
import { clusterNodeArgs } from '../dist/stacks/cluster-stack.js';
import { startRedisServer } from '../dist/stacks/redis-server.js';

const [hogsArg, downloadsArg, secondsArg] = process.argv.slice(2);
const hogs = Number(hogsArg ?? 7);
const downloads = Number(downloadsArg ?? 560);
const seconds = Number(secondsArg ?? 5);
const REQUEST_TIMEOUT_MS = 15_000;
const VICTIM_BYTES = 4096;

interface Round {
  answered: number;
  timeouts: number;
  latencies: number[];
}

/** One GET of the victim's 4 KiB through `port`; its latency in ms, or undefined when it timed out. */
function victimGet(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const start = performance.now();
    const req = request({
      host: '127.0.0.1',
      port,
      path: `/bytes/${VICTIM_BYTES}`,
      headers: { host },
      agent: false,
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), REQUEST_TIMEOUT_MS);
    req.on('error', () => {
      clearTimeout(timer);
      resolve(undefined);
    });
    req.on('response', (res) => {
      let length = 0;
      res.on('data', (chunk: Buffer) => (length += chunk.length));
      res.on('end', () => {
        clearTimeout(timer);
        resolve(res.statusCode === 200 && length === VICTIM_BYTES ? performance.now() - start : undefined);
      });
      res.on('error', () => {});
    });
    req.end();
  });
}

/** Victim requests one after the other for `forSeconds` (one running at the end finishes, within 15 s). */
async function victimRound(port: number, host: string, forSeconds = seconds): Promise<Round> {
  const round: Round = { answered: 0, timeouts: 0, latencies: [] };
  const end = performance.now() + forSeconds * 1000;
  while (performance.now() < end) {
    const ms = await victimGet(port, host);
    if (ms === undefined) round.timeouts++;
    else {
      round.answered++;
      round.latencies.push(ms);
    }
  }
  return round;
}

function percentile(sorted: number[], p: number): string {
  if (sorted.length === 0) return '-';
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!.toFixed(1);
}

function describe(label: string, round: Round): string {
  const sorted = [...round.latencies].sort((x, y) => x - y);
  return (
    `| ${label.padEnd(32)} | ${String(round.answered).padStart(5)} | ${String(round.timeouts).padStart(4)} | ` +
    `${percentile(sorted, 50).padStart(7)} | ${percentile(sorted, 99).padStart(7)} | ${percentile(sorted, 100).padStart(7)} |`
  );
}

/** A download of an endless body through `port` by a client that never reads. */
async function unreadDownload(port: number, host: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.pause();
  socket.write(`GET /bytes/${2 ** 40} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  return socket;
}

/** Bytes the node received from its peers (its /metrics on its public port). */
async function bytesIn(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const match = /^tunnel2_cluster_hop_bytes_total\{direction="in"\} (\d+)/m.exec(text);
  return match === null ? 0 : Number(match[1]);
}

/** Until the ingress's bytes from its peer stop growing (the attack filled what it can), at most 60 s. */
async function attackSettled(port: number): Promise<number> {
  let last = await bytesIn(port);
  let same = 0;
  const end = performance.now() + 60_000;
  while (same < 5 && performance.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = await bytesIn(port);
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

process.env.TUNNEL2_OPS_ON_PUBLIC_PORT = 'true';
const services: ChildService[] = [];
const sockets: Socket[] = [];
const redis = await startRedisServer();
try {
  const backend = await startBackendService();
  services.push(backend);
  const ports = [await freePort(), await freePort()];
  for (const [i, port] of ports.entries())
    services.push(await startEdgeService(clusterNodeArgs(redis.url, `node-${i}`, port)));
  const [holderPort, ingressPort] = ports as [number, number];
  const holderUrl = `http://127.0.0.1:${holderPort}`;
  const hostOf = async (subdomain: string): Promise<string> => {
    const agent = await startAgentService(backend.readyValue, holderUrl, subdomain, false);
    services.push(agent);
    return new URL(agent.readyValue).hostname;
  };
  const victim = await hostOf('victim');
  const hogHosts: string[] = [];
  for (let i = 0; i < hogs; i++) hogHosts.push(await hostOf(`hog${i}`));
  // Opens the link and warms both paths (the first seconds of a process are slower: JIT, buffers).
  await victimRound(ingressPort, victim, 2);
  await victimRound(holderPort, victim, 2);

  const rows: string[] = [];
  rows.push(describe('across the link, baseline', await victimRound(ingressPort, victim)));
  rows.push(describe('on the holder, baseline', await victimRound(holderPort, victim)));
  for (let i = 0; i < downloads; i++) sockets.push(await unreadDownload(ingressPort, hogHosts[i % hogs]!));
  const crossed = await attackSettled(ingressPort);
  rows.push(describe('across the link, under attack', await victimRound(ingressPort, victim)));
  rows.push(describe('on the holder, under attack', await victimRound(holderPort, victim)));
  console.log(
    `${hogs} tunnels, ${downloads} unread downloads through the ingress (${(crossed / 2 ** 20).toFixed(0)} MiB ` +
      `crossed the link before it settled); victim rounds of ${seconds} s, 4 KiB per request`,
  );
  console.log('| victim                           | answ. | t/o  | p50 ms  | p99 ms  | max ms  |');
  console.log('| -------------------------------- | ----- | ---- | ------- | ------- | ------- |');
  for (const row of rows) console.log(row);
} finally {
  for (const socket of sockets) socket.destroy();
  for (const service of services.reverse()) await service.stop();
  await redis.stop();
}
