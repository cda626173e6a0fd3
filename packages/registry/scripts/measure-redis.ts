/**
 * Figures for the Redis registry (issue #14: "10,000 sessions on one node with Redis measured"):
 * claim/renew/lookup latency one call at a time, then N claims, one full renewal round with renewMany
 * (pipelined, what SessionTable#renewAll uses) against the same round renewed one call at a time (the
 * baseline renewMany replaced), and the memory Redis spends on the sessions.
 *
 *   pnpm exec tsc -b && node packages/registry/scripts/measure-redis.ts [--sessions 10000] [--url redis://...]
 *
 * Without --url it starts its own redis-server (Debian package) on a free loopback port.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createRedisRegistry } from '@tunnel2/registry/redis';
import { startRedisServer } from '@tunnel2/test-services';
import { Redis } from 'ioredis';

const { values } = parseArgs({
  options: { sessions: { type: 'string', default: '10000' }, url: { type: 'string' } },
});
const sessions = Number(values.sessions);
const server = values.url === undefined ? await startRedisServer() : undefined;
const url = values.url ?? server?.url ?? '';
const keyPrefix = `t2measure:${randomUUID()}:`;
const registry = await createRedisRegistry({ url, keyPrefix });
const probe = new Redis(url);

const usedMemory = async (): Promise<number> =>
  Number(/used_memory:(\d+)/.exec(await probe.info('memory'))?.[1] ?? Number.NaN);
const totalCommands = async (): Promise<number> =>
  Number(/total_commands_processed:(\d+)/.exec(await probe.info('stats'))?.[1] ?? Number.NaN);
const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
const fmt = (ms: number): string => `${ms.toFixed(3)} ms`;

async function latency(label: string, count: number, run: (i: number) => Promise<unknown>): Promise<void> {
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await run(i);
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  console.log(
    `${label.padEnd(10)} p50 ${fmt(percentile(samples, 50))}  p99 ${fmt(percentile(samples, 99))}  (${count} calls, one at a time)`,
  );
}

const memoryBefore = await usedMemory();
const leases: { name: string; epoch: number }[] = [];
await latency('claim', 2_000, async (i) => {
  const result = await registry.claim({ name: `lat-${i}`, owner: 'o', nodeId: 'node-a', ttlMs: 30_000 });
  if (result.ok) leases.push({ name: result.record.name, epoch: result.record.epoch });
});
await latency('renew', 2_000, (i) => registry.renew(`lat-${i}`, leases[i]?.epoch ?? 1, 30_000));
await latency('lookup', 2_000, (i) => registry.lookup(`lat-${i}`));

leases.length = 0;
let start = performance.now();
const claims = await Promise.all(
  Array.from({ length: sessions }, (_, i) =>
    registry.claim({ name: `s-${i}`, owner: `owner-${i % 100}`, nodeId: 'node-a', ttlMs: 30_000 }),
  ),
);
for (const c of claims) if (c.ok) leases.push({ name: c.record.name, epoch: c.record.epoch });
console.log(
  `${sessions} claims, all issued at once: ${fmt(performance.now() - start)} (${leases.length} won)`,
);

let commandsBefore = await totalCommands();
start = performance.now();
const answers = await registry.renewMany(leases, 30_000);
const manyMs = performance.now() - start;
let commands = (await totalCommands()) - commandsBefore - 1;
console.log(
  `renewMany of ${leases.length}: ${fmt(manyMs)}, ${answers.filter(Boolean).length} renewed, ` +
    `${commands} commands processed by Redis (script-internal ones included) in ${Math.ceil(leases.length / 1_000)} pipelined round trips (batchSize 1000)`,
);

commandsBefore = await totalCommands();
start = performance.now();
for (const { name, epoch } of leases) await registry.renew(name, epoch, 30_000);
commands = (await totalCommands()) - commandsBefore - 1;
console.log(
  `${leases.length} renews one at a time (the baseline before renewMany): ${fmt(performance.now() - start)}, ` +
    `${commands} commands processed by Redis, ${leases.length} round trips`,
);

start = performance.now();
const listed = await registry.list();
console.log(`list() of ${listed.length} records: ${fmt(performance.now() - start)}`);
const memoryAfter = await usedMemory();
const perSession = (memoryAfter - memoryBefore) / (sessions + 2_000);
console.log(
  `Redis used_memory: +${memoryAfter - memoryBefore} bytes, ~${Math.round(perSession)} bytes per session`,
);

await registry.close();
probe.disconnect();
await server?.stop();
