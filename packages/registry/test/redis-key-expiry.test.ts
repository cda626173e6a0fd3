import { randomUUID } from 'node:crypto';
import { type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionRegistry } from '../src/index.js';
import { createRedisRegistry, epochBucket } from '../src/redis-registry.js';

// Issue #29, defect 3: every key the Redis registry writes expires, or goes with what it indexes. Before,
// each owner of a TCP port left its owner index `{o<n>}:own:tcp:<owner>` without a TTL, "cleaned on its next
// read": a throwaway owner (an anonymous agent picks a new key per connection) is never read again, so
// 200 claims left ~280 KB in Redis for good. The 1,024 epoch counters are the one exception, by design:
// bounded, and they must outlive every record (redis-registry.ts, "Epochs").

let server: RedisServer;
let client: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  client = new Redis(server.url);
});
afterAll(async () => {
  client?.disconnect();
  await server?.stop();
});

const freshPrefix = (): string => `t2exp:${randomUUID()}:`;
const EPOCH_COUNTER = /\{b\d+\}:epoch$/;

/** Every key under `prefix` on `redis`, by SCAN (as an operator would look). */
async function scanKeys(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

/** The keys under `prefix` on `redis` that never expire, leaving out the epoch counters. */
async function keysWithoutTtl(redis: Redis, prefix: string): Promise<string[]> {
  const without: string[] = [];
  for (const key of await scanKeys(redis, prefix))
    if (!EPOCH_COUNTER.test(key) && (await redis.pttl(key)) === -1) without.push(key);
  return without;
}

function claimed(result: Awaited<ReturnType<SessionRegistry['claim']>>): number {
  if (!result.ok) throw new Error('claim refused');
  return result.record.epoch;
}

/** Polls `check` (Redis expires keys on its own clock: there is no event to wait for) up to `ms`. */
async function eventually(check: () => Promise<boolean>, ms = 30_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}

describe('redis registry: keys that expire', () => {
  it('gives every key it writes an expiry, but the bounded epoch counters', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    try {
      claimed(await registry.claim({ name: 'app', owner: 'alice', nodeId: 'n', ttlMs: 60_000 }));
      const port = claimed(
        await registry.claim({ name: 'tcp:1', owner: 'alice', nodeId: 'n', ttlMs: 60_000 }),
      );
      claimed(
        await registry.claim({
          name: 'tcp:2',
          owner: 'key-1',
          account: 'addr:x',
          nodeId: 'n',
          ttlMs: 60_000,
        }),
      );
      await registry.renewMany([{ name: 'tcp:1', epoch: port }], 60_000);
      await registry.markDisconnected('tcp:1', port, 60_000);
      await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 60_000 });
      const keys = await scanKeys(client, keyPrefix);
      expect(keys.filter((key) => key.includes(':own:')).sort()).toEqual(
        [
          `${keyPrefix}{o${epochBucket('alice')}}:own:tcp:alice`,
          `${keyPrefix}{o${epochBucket('addr:x')}}:own:tcp:addr:x`,
        ].sort(),
      );
      expect(await keysWithoutTtl(client, keyPrefix)).toEqual([]);
      expect(keys.filter((key) => EPOCH_COUNTER.test(key)).length).toBeGreaterThan(0);
    } finally {
      await registry.close();
    }
  });

  it('keeps an owner index alive as long as the records it lists, never shorter', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix, gcMarginMs: 0 });
    const index = `${keyPrefix}{o${epochBucket('alice')}}:own:tcp:alice`;
    try {
      const short = claimed(
        await registry.claim({ name: 'tcp:1', owner: 'alice', nodeId: 'n', ttlMs: 1_000 }),
      );
      expect(await client.pttl(index)).toBeLessThanOrEqual(1_000);
      // A renewal extends the record, so the index too (it does not know the owner: the record does).
      expect(await registry.renew('tcp:1', short, 600_000)).toBe(true);
      expect(await client.pttl(index)).toBeGreaterThan(300_000);
      // A shorter claim or grace of another of its names never shortens it.
      const other = claimed(
        await registry.claim({ name: 'tcp:2', owner: 'alice', nodeId: 'n', ttlMs: 1_000 }),
      );
      await registry.markDisconnected('tcp:2', other, 2_000);
      expect(await client.pttl(index)).toBeGreaterThan(300_000);
      // A grace longer than what is left extends it.
      const renewed = await registry.renewMany([{ name: 'tcp:1', epoch: short }], 1_000);
      expect(renewed).toEqual([true]);
      await registry.markDisconnected('tcp:1', short, 900_000);
      expect(await client.pttl(index)).toBeGreaterThan(600_000);
    } finally {
      await registry.close();
    }
  });

  it('writes an owner index anew on the next renewal if it expired before its records', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const index = `${keyPrefix}{o${epochBucket('addr:y')}}:own:tcp:addr:y`;
    const claim = (name: string) =>
      registry.claim({ name, owner: 'k', account: 'addr:y', nodeId: 'n', ttlMs: 60_000 });
    try {
      const one = claimed(await claim('tcp:1'));
      const two = claimed(await claim('tcp:2'));
      // A renewal round whose index step failed (a Redis blip) lets the index expire before its records:
      // the ports would stop counting against their address for good (a renewal only extended the set).
      await client.del(index);
      expect(await registry.listOwned('addr:y', 'tcp')).toEqual([]);
      expect(await registry.renewMany([{ name: 'tcp:1', epoch: one }], 60_000)).toEqual([true]);
      expect(await registry.renew('tcp:2', two, 60_000)).toBe(true);
      expect((await client.smembers(index)).sort()).toEqual(['tcp:1', 'tcp:2']);
      expect(await client.pttl(index)).toBeGreaterThan(0);
      await client.del(index);
      await registry.markDisconnected('tcp:1', one, 30_000);
      expect(await client.smembers(index)).toEqual(['tcp:1']);
    } finally {
      await registry.close();
    }
  });

  it('takes a released name, or one freed with a grace of 0, out of its owner index at once', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const index = `${keyPrefix}{o${epochBucket('addr:x')}}:own:tcp:addr:x`;
    try {
      const a = claimed(
        await registry.claim({ name: 'tcp:1', owner: 'k', account: 'addr:x', nodeId: 'n', ttlMs: 60_000 }),
      );
      const b = claimed(
        await registry.claim({ name: 'tcp:2', owner: 'k', account: 'addr:x', nodeId: 'n', ttlMs: 60_000 }),
      );
      expect((await client.smembers(index)).sort()).toEqual(['tcp:1', 'tcp:2']);
      await registry.release('tcp:1', a);
      expect(await client.smembers(index)).toEqual(['tcp:2']);
      await registry.markDisconnected('tcp:2', b, 0);
      expect(await client.exists(index)).toBe(0);
    } finally {
      await registry.close();
    }
  });

  it('gives an owner index written without an expiry (before this fix) one on its next write', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const index = `${keyPrefix}{o${epochBucket('alice')}}:own:tcp:alice`;
    try {
      await client.sadd(index, 'tcp:9');
      claimed(await registry.claim({ name: 'tcp:1', owner: 'alice', nodeId: 'n', ttlMs: 60_000 }));
      expect(await client.pttl(index)).toBeGreaterThan(0);
    } finally {
      await registry.close();
    }
  });

  it('leaves nothing of 10,000 throwaway owners once their leases run out: used_memory back within 5%', async () => {
    // Its own redis-server: used_memory is the whole server's.
    const own = await startRedisServer();
    const probe = new Redis(own.url);
    const keyPrefix = freshPrefix();
    // Short leases and no GC margin, so Redis expires the keys within the test.
    const registry = await createRedisRegistry({ url: own.url, keyPrefix, gcMarginMs: 50 });
    const usedMemory = async (): Promise<number> => Number((await own.info()).get('used_memory'));
    const onlyCounters = async (): Promise<boolean> =>
      (await scanKeys(probe, keyPrefix)).every((key) => EPOCH_COUNTER.test(key));
    /** What an anonymous agent does that opens a TCP tunnel and leaves: a new owner, claim, grace. */
    const soak = async (round: number): Promise<void> => {
      for (let start = 0; start < 10_000; start += 500) {
        await Promise.all(
          Array.from({ length: 500 }, async (_, i) => {
            const owner = `throwaway-${round}-${start + i}`;
            const name = `tcp:${start + i}`;
            const epoch = claimed(await registry.claim({ name, owner, nodeId: 'n', ttlMs: 300 }));
            await registry.markDisconnected(name, epoch, 300);
          }),
        );
      }
    };
    try {
      // A first round creates what stays by design (the 1,024 epoch counters, Redis's script cache) and
      // grows Redis's tables once; the second must then give back everything it took.
      await soak(1);
      expect(await eventually(onlyCounters)).toBe(true);
      let start = await usedMemory();
      // Settled: two readings a moment apart agree (Redis shrinks its tables in its cron).
      await eventually(async () => {
        const now = await usedMemory();
        const settled = Math.abs(now - start) < start * 0.01;
        start = now;
        return settled;
      });
      await soak(2);
      const peak = await usedMemory();
      expect(peak).toBeGreaterThan(start * 1.05);
      expect(await eventually(onlyCounters)).toBe(true);
      // No key without an expiry is left of those owners, and none of their keys at all.
      expect(await keysWithoutTtl(probe, keyPrefix)).toEqual([]);
      expect((await scanKeys(probe, keyPrefix)).filter((key) => key.includes('throwaway'))).toEqual([]);
      expect(await eventually(async () => (await usedMemory()) <= start * 1.05)).toBe(true);
    } finally {
      await registry.close();
      probe.disconnect();
      await own.stop();
    }
  }, 120_000);
});
