// Bytes across cluster nodes: a download and an upload through a node that does not hold the session
// (client → that node → node link → holder → agent → backend), with each node's CPU (from /proc) and peak RSS
// so far (VmHWM). Fails unless the bytes take a node link rather than the HTTP hop.
// The cluster is `pnpm bench cluster`'s: redis-server, HAProxy, the nodes, a backend and an agent.
//   node bench/scripts/cluster-transfer.ts [rounds=3] [MiB=1024]
// Round 0 warms up with 128 MiB each way and is not counted. Build first (`pnpm exec tsc -b`).
import { request } from 'node:http';
import { bulkDownload, bulkUpload } from '../dist/measure/bulk-client.js';
import { readCpuMs, readStatusKb } from '../dist/measure/process-stats.js';
import type { LoadTarget } from '../dist/stacks/bench-stack.js';
import { type ClusterNode, startClusterStack } from '../dist/stacks/cluster-stack.js';

const [roundsArg, mibArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 3);
const bytes = Number(mibArg ?? 1024) * 2 ** 20;
const chunk = Buffer.alloc(256 * 1024, 0x5a);

/** The node that answers for the session (its `x-tunnel2-node`), asked through `target`. */
function holderId(target: LoadTarget): Promise<string> {
  return new Promise((resolve, reject) => {
    const url = new URL(target.origin);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: '/loadtest/ping',
        headers: { host: target.host },
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.headers['x-tunnel2-node'])));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** The node's open links to peers, from its /metrics (served on its public port, see below). */
async function linksOpen(node: ClusterNode): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.port}/metrics`)).text();
  const match = /^tunnel2_cluster_links (\d+)/m.exec(text);
  if (match === null) throw new Error(`${node.id}: no tunnel2_cluster_links in /metrics`);
  return Number(match[1]);
}

// The nodes inherit this: /metrics on their public port, to check the bytes take the link.
process.env.TUNNEL2_OPS_ON_PUBLIC_PORT = 'true';
const stack = await startClusterStack(2, 'transfer');
try {
  const holder = await holderId(stack.lb);
  const holding = stack.nodes.find((node) => node.id === holder);
  const arrival = stack.nodes.find((node) => node.id !== holder);
  if (holding === undefined || arrival === undefined) throw new Error(`no holder found (${holder})`);
  const target = stack.nodeTarget(arrival);
  const cpu = (node: ClusterNode): number => readCpuMs(node.service.pid) ?? Number.NaN;
  const peakMb = (node: ClusterNode): number =>
    (readStatusKb(node.service.pid, 'VmHWM') ?? Number.NaN) / 1024;
  console.log(`holder ${holding.id}, requests arrive at ${arrival.id}`);
  for (let round = 0; round <= rounds; round++) {
    const size = round === 0 ? 128 * 2 ** 20 : bytes;
    for (const direction of ['download', 'upload'] as const) {
      const before = [cpu(arrival), cpu(holding), readCpuMs(stack.agent.pid) ?? Number.NaN];
      const t0 = performance.now();
      const moved =
        direction === 'download' ? await bulkDownload(target, size) : await bulkUpload(target, size, chunk);
      const seconds = (performance.now() - t0) / 1000;
      if (moved !== size) throw new Error(`${direction}: ${moved} of ${size} bytes`);
      const after = [cpu(arrival), cpu(holding), readCpuMs(stack.agent.pid) ?? Number.NaN];
      if (round === 0) {
        // The HTTP hop (a peer refusing links) would be measured here silently otherwise.
        if ((await linksOpen(arrival)) < 1)
          throw new Error(`${arrival.id} has no link open: not over a link`);
        continue;
      }
      const [arrivalMs, holderMs, agentMs] = after.map((value, i) => value - before[i]!);
      console.log(
        `round ${round} ${direction}: ${(size / seconds / 1e6).toFixed(0)} MB/s; CPU arrival ${arrivalMs} ms, ` +
          `holder ${holderMs} ms, agent ${agentMs} ms; peak RSS so far arrival ${peakMb(arrival).toFixed(0)} MB, ` +
          `holder ${peakMb(holding).toFixed(0)} MB`,
      );
    }
  }
} finally {
  await stack.close();
}
