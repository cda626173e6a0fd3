/**
 * The Redis registry on one Redis beside the same on a three-master Redis Cluster, in one run: N claims issued
 * at once, one full renewal round (renewMany, pipelined per master on the cluster) and list(), repeated; medians.
 * All servers on loopback, on the same cores as the client: what the cluster's split into per-master
 * pipelines costs in client work, not what a network adds.
 *
 *   pnpm exec tsc -b && node packages/registry/scripts/measure-redis-cluster.ts [--sessions 10000] [--runs 5]
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { HeldLease, SessionRegistry } from '@tunnel2/registry';
import { createRedisRegistry } from '@tunnel2/registry/redis';
import { startRedisCluster, startRedisServer } from '@tunnel2/test-services';

const { values } = parseArgs({
  options: { sessions: { type: 'string', default: '10000' }, runs: { type: 'string', default: '5' } },
});
const sessions = Number(values.sessions);
const runs = Number(values.runs);
const server = await startRedisServer();
const cluster = await startRedisCluster();

const timed = async (run: () => Promise<unknown>): Promise<number> => {
  const start = performance.now();
  await run();
  return performance.now() - start;
};
const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function round(url: string): Promise<{ claims: number; renewMany: number; list: number }> {
  const registry: SessionRegistry = await createRedisRegistry({ url, keyPrefix: `t2m:${randomUUID()}:` });
  const leases: HeldLease[] = [];
  const claims = await timed(async () => {
    const results = await Promise.all(
      Array.from({ length: sessions }, (_, i) =>
        registry.claim({ name: `s${i}`, owner: 'o', nodeId: 'n', ttlMs: 60_000 }),
      ),
    );
    for (const r of results) if (r.ok) leases.push({ name: r.record.name, epoch: r.record.epoch });
  });
  const renewMany = await timed(() => registry.renewMany(leases, 60_000));
  const list = await timed(() => registry.list());
  await registry.close();
  return { claims, renewMany, list };
}

const results: Record<string, { claims: number[]; renewMany: number[]; list: number[] }> = {
  standalone: { claims: [], renewMany: [], list: [] },
  cluster: { claims: [], renewMany: [], list: [] },
};
for (let i = 0; i < runs; i++) {
  // Alternated within each run, so drift of the shared machine falls on both alike.
  for (const [label, url] of [
    ['standalone', server.url],
    ['cluster', cluster.url],
  ] as const) {
    const r = await round(url);
    const into = results[label];
    if (into === undefined) continue;
    into.claims.push(r.claims);
    into.renewMany.push(r.renewMany);
    into.list.push(r.list);
  }
}
for (const [label, r] of Object.entries(results)) {
  process.stdout.write(
    `${label}: ${sessions} claims at once ${median(r.claims).toFixed(0)} ms, renewMany of ${sessions} ` +
      `${median(r.renewMany).toFixed(0)} ms, list() ${median(r.list).toFixed(0)} ms (medians of ${runs})\n`,
  );
}
await cluster.stop();
await server.stop();
