import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ReplicaClaimResult, ReplicaHolder, ReplicaSetRegistry, SessionRegistry } from '../src/index.js';
import { createFakeClock, type FakeClock } from './fake-clock.js';

export type ReplicaRegistryFactory = (
  clock: FakeClock,
) => Promise<{ registry: SessionRegistry & ReplicaSetRegistry; cleanup: () => Promise<void> }>;

const INVALID = { code: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT' };
const CLOSED = { code: 'TUNNEL2_ERR_REGISTRY_CLOSED' };

function held(result: ReplicaClaimResult): ReplicaHolder {
  if (!result.ok) throw new Error(`expected the replica claim to succeed, ${result.owner} holds the name`);
  return result.holder;
}

/**
 * The replica-set half of the registry contract (replica-sets.ts), run against every implementation like
 * registry-contract.ts, on a fake clock.
 */
export function replicaSetContract(name: string, factory: ReplicaRegistryFactory): void {
  describe(`ReplicaSetRegistry contract: ${name}`, () => {
    let clock: FakeClock;
    let registry: SessionRegistry & ReplicaSetRegistry;
    let cleanup: () => Promise<void>;
    const join = (n: string, owner: string, nodeId: string, ttlMs = 10_000) =>
      registry.claimReplica({ name: n, owner, nodeId, ttlMs });

    beforeEach(async () => {
      clock = createFakeClock();
      const made = await factory(clock);
      registry = made.registry;
      cleanup = made.cleanup;
    });
    afterEach(() => cleanup());

    it('holds several nodes of one owner in one set, each with its own epoch', async () => {
      const start = clock.now();
      const a = held(await join('api', 'alice', 'node-a'));
      const b = held(await join('api', 'alice', 'node-b', 5_000));
      expect(b.epoch).toBeGreaterThan(a.epoch);
      expect(a).toEqual({ nodeId: 'node-a', epoch: a.epoch, expiresAt: start + 10_000 });
      expect(await registry.lookupReplicas('api')).toEqual({
        name: 'api',
        owner: 'alice',
        account: 'alice',
        holders: [a, { nodeId: 'node-b', epoch: b.epoch, expiresAt: start + 5_000 }],
      });
      expect(await registry.lookupReplicas('other')).toBeUndefined();
    });

    it('refuses another owner while the set lives, and both ways against exclusive records', async () => {
      held(await join('api', 'alice', 'node-a'));
      expect(await join('api', 'mallory', 'node-b')).toEqual({
        ok: false,
        reason: 'owned-by-other',
        owner: 'alice',
      });
      const exclusive = await registry.claim({
        name: 'api',
        owner: 'mallory',
        nodeId: 'node-b',
        ttlMs: 1_000,
      });
      expect(exclusive.ok).toBe(false);
      if (!exclusive.ok) expect(exclusive.record.owner).toBe('alice');
      await registry.claim({ name: 'solo', owner: 'bob', nodeId: 'node-a', ttlMs: 1_000 });
      expect(await join('solo', 'mallory', 'node-b')).toMatchObject({ ok: false, owner: 'bob' });
      expect(await registry.lookup('api')).toBeUndefined();
    });

    it('lets another owner in once every holder has expired or left', async () => {
      const a = held(await join('api', 'alice', 'node-a', 1_000));
      const b = held(await join('api', 'alice', 'node-b', 3_000));
      clock.advance(1_000);
      expect((await registry.lookupReplicas('api'))?.holders).toEqual([b]);
      expect(await registry.renewReplica('api', 'node-a', a.epoch, 1_000)).toBe(false);
      expect(await registry.releaseReplica('api', 'node-b', b.epoch)).toBe(true);
      expect(await registry.lookupReplicas('api')).toBeUndefined();
      expect((await join('api', 'mallory', 'node-c')).ok).toBe(true);
    });

    it('renews and releases only at the holder’s current epoch', async () => {
      const first = held(await join('api', 'alice', 'node-a'));
      const again = held(await join('api', 'alice', 'node-a'));
      expect(again.epoch).toBeGreaterThan(first.epoch);
      expect((await registry.lookupReplicas('api'))?.holders).toHaveLength(1);
      expect(await registry.renewReplica('api', 'node-a', first.epoch, 20_000)).toBe(false);
      expect(await registry.releaseReplica('api', 'node-a', first.epoch)).toBe(false);
      clock.advance(9_000);
      expect(await registry.renewReplica('api', 'node-a', again.epoch, 20_000)).toBe(true);
      clock.advance(19_000);
      expect((await registry.lookupReplicas('api'))?.holders).toEqual([
        { nodeId: 'node-a', epoch: again.epoch, expiresAt: clock.now() + 1_000 },
      ]);
      expect(await registry.renewReplica('api', 'node-b', again.epoch, 1_000)).toBe(false);
      expect(await registry.releaseReplica('api', 'node-a', again.epoch)).toBe(true);
      expect(await registry.releaseReplica('api', 'node-a', again.epoch)).toBe(false);
    });

    it('keeps epochs rising across exclusive and replica claims of a name', async () => {
      const exclusive = await registry.claim({ name: 'api', owner: 'alice', nodeId: 'node-a', ttlMs: 1_000 });
      if (!exclusive.ok) throw new Error('claim refused');
      const replica = held(await join('api', 'alice', 'node-b'));
      expect(replica.epoch).toBeGreaterThan(exclusive.record.epoch);
      const after = await registry.claim({ name: 'api', owner: 'alice', nodeId: 'node-a', ttlMs: 1_000 });
      expect(after.ok && after.record.epoch > replica.epoch).toBe(true);
    });

    it('validates arguments and refuses calls once closed', async () => {
      await expect(join('', 'alice', 'node-a')).rejects.toMatchObject(INVALID);
      await expect(join('api', 'alice', 'node-a', 0)).rejects.toMatchObject(INVALID);
      await expect(registry.renewReplica('api', '', 1, 1_000)).rejects.toMatchObject(INVALID);
      await expect(registry.releaseReplica('api', 'node-a', -1)).rejects.toMatchObject(INVALID);
      await expect(registry.lookupReplicas('')).rejects.toMatchObject(INVALID);
      await registry.close();
      await expect(join('api', 'alice', 'node-a')).rejects.toMatchObject(CLOSED);
      await expect(registry.lookupReplicas('api')).rejects.toMatchObject(CLOSED);
    });
  });
}
