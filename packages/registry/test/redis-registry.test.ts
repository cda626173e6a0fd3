import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { freePort, type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistryErrorCode, type SessionRegistry } from '../src/index.js';
import {
  createRedisRegistry,
  EPOCH_BUCKETS,
  epochBucket,
  type RedisRegistryOptions,
} from '../src/redis-registry.js';
import { createFakeClock } from './fake-clock.js';
import { registryContract } from './registry-contract.js';
import { replicaSetContract } from './replica-set-contract.js';

let server: RedisServer;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(() => server?.stop());

/** A fresh key prefix per registry: tests share one redis-server and never see each other's keys. */
const freshPrefix = (): string => `t2test:${randomUUID()}:`;

registryContract('redis', async (clock) => {
  const registry = await createRedisRegistry({ url: server.url, clock: clock.now, keyPrefix: freshPrefix() });
  return { registry, cleanup: () => registry.close() };
});

replicaSetContract('redis', async (clock) => {
  const registry = await createRedisRegistry({ url: server.url, clock: clock.now, keyPrefix: freshPrefix() });
  return { registry, cleanup: () => registry.close() };
});

describe('redis registry', () => {
  const open = (options: Partial<RedisRegistryOptions> = {}): Promise<SessionRegistry> =>
    createRedisRegistry({ url: server.url, keyPrefix: freshPrefix(), ...options });

  it('fails at creation with UNAVAILABLE when nothing listens at the URL', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const started = Date.now();
    await expect(createRedisRegistry({ url, connectTimeoutMs: 1_000 })).rejects.toMatchObject({
      code: RegistryErrorCode.UNAVAILABLE,
    });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('validates its options', async () => {
    for (const bad of [
      { url: 'http://127.0.0.1:6379' },
      { url: server.url, keyPrefix: 'a{b}' },
      { url: server.url, commandTimeoutMs: 0 },
      { url: server.url, batchSize: 1.5 },
      { url: server.url, gcMarginMs: -1 },
    ]) {
      await expect(createRedisRegistry(bad)).rejects.toMatchObject({
        code: RegistryErrorCode.INVALID_ARGUMENT,
      });
    }
  });

  it('keeps registries with different prefixes apart on one Redis', async () => {
    const a = await open();
    const b = await open();
    expect((await a.claim({ name: 'app', owner: 'alice', nodeId: 'n', ttlMs: 10_000 })).ok).toBe(true);
    expect(await b.lookup('app')).toBeUndefined();
    expect((await b.claim({ name: 'app', owner: 'bob', nodeId: 'n', ttlMs: 10_000 })).ok).toBe(true);
    expect(await a.list()).toHaveLength(1);
    await a.close();
    await b.close();
  });

  it('sees a claim made by another node (another client) at once', async () => {
    const keyPrefix = freshPrefix();
    const clock = createFakeClock();
    const a = await createRedisRegistry({ url: server.url, keyPrefix, clock: clock.now });
    const b = await createRedisRegistry({ url: server.url, keyPrefix, clock: clock.now });
    const claimed = await a.claim({ name: 'app', owner: 'alice', nodeId: 'node-a', ttlMs: 10_000 });
    expect(claimed.ok).toBe(true);
    expect(await b.lookup('app')).toEqual(claimed.ok ? claimed.record : undefined);
    expect((await b.claim({ name: 'app', owner: 'mallory', nodeId: 'node-b', ttlMs: 10_000 })).ok).toBe(
      false,
    );
    await a.close();
    await b.close();
  });

  it('lists many records across SCAN steps and batches', async () => {
    const registry = await open({ batchSize: 7 });
    const names = Array.from({ length: 100 }, (_, i) => `n${i}`);
    await Promise.all(names.map((name) => registry.claim({ name, owner: 'o', nodeId: 'a', ttlMs: 10_000 })));
    const listed = (await registry.list()).map((r) => r.name).sort();
    expect(listed).toEqual([...names].sort());
    await registry.close();
  });

  it('renews many leases in pipelined batches, answering in order', async () => {
    const registry = await open({ batchSize: 3 });
    const leases = [];
    for (let i = 0; i < 10; i++) {
      const result = await registry.claim({ name: `n${i}`, owner: 'o', nodeId: 'a', ttlMs: 10_000 });
      if (!result.ok) throw new Error('claim refused');
      leases.push({ name: result.record.name, epoch: result.record.epoch + (i % 2) });
    }
    expect(await registry.renewMany(leases, 10_000)).toEqual(leases.map((_, i) => i % 2 === 0));
    await registry.close();
  });

  it('rejects promptly with UNAVAILABLE while Redis is down, and works again once it is back', async () => {
    const own = await startRedisServer();
    const registry = await createRedisRegistry({
      url: own.url,
      keyPrefix: freshPrefix(),
      commandTimeoutMs: 1_000,
    });
    try {
      const first = await registry.claim({ name: 'app', owner: 'alice', nodeId: 'n', ttlMs: 60_000 });
      expect(first.ok).toBe(true);
      await own.stop();
      const started = Date.now();
      const calls = [
        registry.claim({ name: 'other', owner: 'bob', nodeId: 'n', ttlMs: 60_000 }),
        registry.renew('app', 1, 60_000),
        registry.renewMany([{ name: 'app', epoch: 1 }], 60_000),
        registry.lookup('app'),
        registry.list(),
        registry.ping(),
      ];
      for (const pending of calls) {
        await expect(pending).rejects.toMatchObject({ code: RegistryErrorCode.UNAVAILABLE });
      }
      // The bound is the command timeout (1 s) with room for a loaded machine, not a measured figure.
      expect(Date.now() - started).toBeLessThan(5_000);

      await own.start();
      // ioredis reconnects in the background (backoff capped at 1 s): wait for it, bounded in count.
      let recovered = false;
      for (let attempt = 0; attempt < 100 && !recovered; attempt++) {
        recovered = await registry.ping().then(
          () => true,
          async () => {
            await new Promise((resolve) => setTimeout(resolve, 100));
            return false;
          },
        );
      }
      expect(recovered).toBe(true);
      // A restarted server (no persistence) has lost every key and its script cache; the scripts reload.
      const again = await registry.claim({ name: 'app', owner: 'bob', nodeId: 'n', ttlMs: 60_000 });
      expect(again.ok).toBe(true);
      expect(await registry.lookup('app')).toMatchObject({ owner: 'bob' });
    } finally {
      await registry.close();
      await own.stop();
    }
  });

  it('keeps epochs rising when Redis lost the counter and the record (a failover that lost writes)', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const client = new Redis(server.url);
    try {
      const first = await registry.claim({ name: 'app', owner: 'alice', nodeId: 'n', ttlMs: 60_000 });
      if (!first.ok) throw new Error('claim refused');
      // What a promoted replica that never saw the claim looks like: neither the hash nor the counter.
      const keys = await client.keys(`${keyPrefix}*`);
      expect(keys).toHaveLength(2);
      await client.del(...keys);
      const second = await registry.claim({ name: 'app', owner: 'bob', nodeId: 'n', ttlMs: 60_000 });
      if (!second.ok) throw new Error('claim refused');
      // The Redis-time floor puts the new epoch above the lost one: alice's epoch acts on nothing.
      expect(second.record.epoch).toBeGreaterThan(first.record.epoch);
      expect(await registry.release('app', first.record.epoch)).toBe(false);
    } finally {
      client.disconnect();
      await registry.close();
    }
  });

  it('reads a record written before records stored their account without one (a rolling upgrade)', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const client = new Redis(server.url);
    try {
      const claimed = await registry.claim({
        name: 'app',
        owner: 'key-1',
        account: 'addr:x',
        nodeId: 'n',
        ttlMs: 60_000,
      });
      if (!claimed.ok) throw new Error('claim refused');
      // What an older node's claim leaves: the same hash without the field.
      await client.hdel(`${keyPrefix}{b${epochBucket('app')}}:s:app`, 'account');
      const record = await registry.lookup('app');
      expect(record).toMatchObject({ owner: 'key-1', epoch: claimed.record.epoch });
      expect(record?.account).toBeUndefined();
      expect(await registry.renew('app', claimed.record.epoch, 60_000)).toBe(true);
    } finally {
      client.disconnect();
      await registry.close();
    }
  });

  it('lays keys out for Redis Cluster: a name and its epoch counter share one hash tag', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: server.url, keyPrefix });
    const client = new Redis(server.url);
    try {
      await registry.claim({ name: 'app', owner: 'alice', nodeId: 'n', ttlMs: 60_000 });
      await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 60_000 });
      const tag = `{b${epochBucket('app')}}`;
      expect((await client.keys(`${keyPrefix}*`)).sort()).toEqual(
        [`${keyPrefix}${tag}:epoch`, `${keyPrefix}${tag}:s:app`, `${keyPrefix}{nodes}:node:node-a`].sort(),
      );
      // Redis deletes keys itself some time after their logical expiry (garbage collection only).
      const ttl = await client.pttl(`${keyPrefix}${tag}:s:app`);
      expect(ttl).toBeGreaterThan(60_000);
      expect(await client.pttl(`${keyPrefix}${tag}:epoch`)).toBe(-1);
    } finally {
      client.disconnect();
      await registry.close();
    }
  });

  it('spreads names over the epoch buckets', () => {
    const buckets = new Set(Array.from({ length: 10_000 }, (_, i) => epochBucket(`name-${i}`)));
    expect(buckets.size).toBeGreaterThan(EPOCH_BUCKETS * 0.95);
    for (const b of buckets) expect(b >= 0 && b < EPOCH_BUCKETS).toBe(true);
  });

  it('keeps ioredis out of the main entry: only the redis entry and its client file load it', async () => {
    const dir = new URL('../src/', import.meta.url);
    // redis-replica-sets.ts is the replica half of the redis entry, reached only through redis-registry.ts.
    const loaders = ['redis-client.ts', 'redis-registry.ts', 'redis-replica-sets.ts'];
    for (const file of await readdir(dir)) {
      const text = await readFile(new URL(file, dir), 'utf8');
      const importsRedis = /from '(ioredis|cluster-key-slot)'|from '\.\/redis-(registry|client)\.js'/.test(
        text,
      );
      expect({ file, importsRedis }).toEqual({ file, importsRedis: loaders.includes(file) });
    }
  });
});
