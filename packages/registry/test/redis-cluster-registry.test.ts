import { randomUUID } from 'node:crypto';
import { type RedisCluster, startRedisCluster } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistryErrorCode } from '../src/index.js';
import { createRedisRegistry, epochBucket } from '../src/redis-registry.js';
import { registryContract } from './registry-contract.js';
import { replicaSetContract } from './replica-set-contract.js';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await startRedisCluster();
}, 60_000);
afterAll(() => cluster?.stop());

const freshPrefix = (): string => `t2test:${randomUUID()}:`;

// The same contract as the memory registry and a single Redis, unchanged, on a real three-master cluster.
registryContract('redis cluster', async (clock) => {
  const registry = await createRedisRegistry({
    url: cluster.url,
    clock: clock.now,
    keyPrefix: freshPrefix(),
  });
  return { registry, cleanup: () => registry.close() };
});

replicaSetContract('redis cluster', async (clock) => {
  const registry = await createRedisRegistry({
    url: cluster.url,
    clock: clock.now,
    keyPrefix: freshPrefix(),
  });
  return { registry, cleanup: () => registry.close() };
});

describe('redis registry on a Redis Cluster', () => {
  it('spreads names over every master, and list() finds them all', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: cluster.url, keyPrefix, batchSize: 16 });
    try {
      const names = Array.from({ length: 60 }, (_, i) => `spread-${i}`);
      await Promise.all(
        names.map((name) => registry.claim({ name, owner: 'o', nodeId: 'a', ttlMs: 60_000 })),
      );
      // Which masters hold the names' records, asked of each master itself.
      const holders = new Set<string>();
      for (const node of cluster.nodes) {
        const keys = await cluster.cli(node.port, '--scan', '--pattern', `${keyPrefix}*:s:*`);
        if (keys !== '') holders.add(String(node.port));
      }
      expect(holders.size).toBe(3);
      expect((await registry.list()).map((r) => r.name).sort()).toEqual([...names].sort());
    } finally {
      await registry.close();
    }
  });

  it('renews leases held on every master in one call, answering in order', async () => {
    const registry = await createRedisRegistry({ url: cluster.url, keyPrefix: freshPrefix(), batchSize: 7 });
    try {
      const leases = [];
      for (let i = 0; i < 30; i++) {
        const result = await registry.claim({ name: `r${i}`, owner: 'o', nodeId: 'a', ttlMs: 10_000 });
        if (!result.ok) throw new Error('claim refused');
        leases.push({ name: result.record.name, epoch: result.record.epoch + (i % 3 === 0 ? 1 : 0) });
      }
      expect(await registry.renewMany(leases, 10_000)).toEqual(leases.map((_, i) => i % 3 !== 0));
    } finally {
      await registry.close();
    }
  });

  it('puts the node directory under one hash tag, and the records of a name with its counter', async () => {
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: cluster.url, keyPrefix });
    try {
      await registry.announceNode({ nodeId: 'edge-1', url: 'http://10.0.0.1:8080', ttlMs: 60_000 });
      await registry.announceNode({ nodeId: 'edge-2', url: 'http://10.0.0.2:8080', ttlMs: 60_000 });
      expect(await registry.lookupNode('edge-2')).toMatchObject({ url: 'http://10.0.0.2:8080' });
      const port = cluster.nodes[0]?.port ?? 0;
      const slot = (key: string): Promise<string> => cluster.cli(port, 'CLUSTER', 'KEYSLOT', key);
      expect(await slot(`${keyPrefix}{nodes}:node:edge-1`)).toBe(
        await slot(`${keyPrefix}{nodes}:node:edge-2`),
      );
      const tag = `${keyPrefix}{b${epochBucket('app')}}`;
      expect(await slot(`${tag}:s:app`)).toBe(await slot(`${tag}:epoch`));
      expect(await registry.withdrawNode('edge-1')).toBe(true);
      await registry.ping();
    } finally {
      await registry.close();
    }
  });

  it('answers UNAVAILABLE for names on a master that is down, promptly, and keeps serving the others', async () => {
    const own = await startRedisCluster();
    const keyPrefix = freshPrefix();
    const registry = await createRedisRegistry({ url: own.url, keyPrefix, commandTimeoutMs: 1_000 });
    try {
      const down = own.nodes[2];
      if (down === undefined) throw new Error('no third node');
      // A name on the node about to stop, and one elsewhere, found by asking the cluster where keys live.
      const onDown: string[] = [];
      const elsewhere: string[] = [];
      for (let i = 0; i < 40 && (onDown.length === 0 || elsewhere.length === 0); i++) {
        const name = `f${i}`;
        await registry.claim({ name, owner: 'o', nodeId: 'a', ttlMs: 60_000 });
        const key = `${keyPrefix}{b${epochBucket(name)}}:s:${name}`;
        ((await own.cli(down.port, 'EXISTS', key)) === '1' ? onDown : elsewhere).push(name);
      }
      const [lost, kept] = [onDown[0], elsewhere[0]];
      if (lost === undefined || kept === undefined) throw new Error('names did not spread over the masters');
      await down.stop();
      const started = Date.now();
      await expect(registry.lookup(lost)).rejects.toMatchObject({ code: RegistryErrorCode.UNAVAILABLE });
      await expect(registry.ping()).rejects.toMatchObject({ code: RegistryErrorCode.UNAVAILABLE });
      // The bound is the command timeout (1 s) with room for a loaded machine, not a measured figure.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(await registry.lookup(kept)).toMatchObject({ name: kept, owner: 'o' });
    } finally {
      await registry.close();
      await own.stop();
    }
  });

  it('fails at creation with UNAVAILABLE when no seed answers', async () => {
    // Port 1 (tcpmux): nothing listens there on loopback.
    await expect(
      createRedisRegistry({ url: 'redis+cluster://127.0.0.1:1', connectTimeoutMs: 500 }),
    ).rejects.toMatchObject({
      code: RegistryErrorCode.UNAVAILABLE,
    });
  });
});
