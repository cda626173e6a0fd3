import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionRegistry } from '../src/index.js';

/** A clock the test moves by hand: no sleeps, no real time. */
export interface FakeClock {
  now: () => number;
  advance: (ms: number) => void;
}

export function createFakeClock(start = 1_700_000_000_000): FakeClock {
  let time = start;
  return {
    now: () => time,
    advance: (ms) => {
      time += ms;
    },
  };
}

export type RegistryFactory = (
  clock: FakeClock,
) => Promise<{ registry: SessionRegistry; cleanup: () => Promise<void> }>;

/**
 * The behaviour every SessionRegistry implementation must have. Run it for each one (memory now,
 * Redis when it lands) so they cannot drift apart.
 */
export function registryContract(name: string, factory: RegistryFactory): void {
  describe(`SessionRegistry contract: ${name}`, () => {
    let clock: FakeClock;
    let registry: SessionRegistry;
    let cleanup: () => Promise<void>;
    const claim = (n: string, owner: string, ttlMs = 10_000, nodeId = 'node-a') =>
      registry.claim({ name: n, owner, nodeId, ttlMs });

    beforeEach(async () => {
      clock = createFakeClock();
      ({ registry, cleanup } = await factory(clock));
    });
    afterEach(() => cleanup());

    it('claims a free name and finds it', async () => {
      const result = await claim('app', 'alice');
      expect(result.ok).toBe(true);
      const record = await registry.lookup('app');
      expect(record).toMatchObject({ name: 'app', owner: 'alice', nodeId: 'node-a', connected: true });
      expect(record?.epoch).toBe(result.record.epoch);
      expect(await registry.lookup('other')).toBeUndefined();
    });

    it('refuses a live name to another owner and shows who holds it', async () => {
      await claim('app', 'alice');
      const result = await claim('app', 'mallory');
      expect(result).toMatchObject({ ok: false, reason: 'owned-by-other', record: { owner: 'alice' } });
      expect((await registry.lookup('app'))?.owner).toBe('alice');
    });

    it('lets the same owner take over with a higher epoch', async () => {
      const first = await claim('app', 'alice');
      const second = await claim('app', 'alice', 10_000, 'node-b');
      expect(second.ok).toBe(true);
      expect(second.record.epoch).toBeGreaterThan(first.record.epoch);
      expect((await registry.lookup('app'))?.nodeId).toBe('node-b');
    });

    it('a stale epoch cannot renew, disconnect or release the newer session', async () => {
      const first = await claim('app', 'alice');
      const second = await claim('app', 'alice');
      expect(await registry.renew('app', first.record.epoch, 10_000)).toBe(false);
      expect(await registry.markDisconnected('app', first.record.epoch, 10_000)).toBe(false);
      expect(await registry.release('app', first.record.epoch)).toBe(false);
      const record = await registry.lookup('app');
      expect(record).toMatchObject({ epoch: second.record.epoch, connected: true });
    });

    it('expires a lease that is not renewed, freeing the name for anyone', async () => {
      const first = await claim('app', 'alice', 1_000);
      clock.advance(999);
      expect(await registry.renew('app', first.record.epoch, 1_000)).toBe(true);
      clock.advance(999);
      expect(await registry.lookup('app')).toBeDefined();
      clock.advance(2);
      expect(await registry.lookup('app')).toBeUndefined();
      expect((await claim('app', 'mallory')).ok).toBe(true);
    });

    it('keeps a disconnected name for its owner only, until the grace ends', async () => {
      const first = await claim('app', 'alice');
      expect(await registry.markDisconnected('app', first.record.epoch, 5_000)).toBe(true);
      expect(await registry.lookup('app')).toMatchObject({ connected: false });
      expect((await claim('app', 'mallory')).ok).toBe(false);
      clock.advance(4_000);
      const back = await claim('app', 'alice');
      expect(back).toMatchObject({ ok: true, record: { connected: true } });
      expect(await registry.markDisconnected('app', back.record.epoch, 5_000)).toBe(true);
      clock.advance(5_001);
      expect(await registry.lookup('app')).toBeUndefined();
      expect((await claim('app', 'mallory')).ok).toBe(true);
    });

    it('a disconnected session cannot be renewed (its connection is gone)', async () => {
      const first = await claim('app', 'alice');
      await registry.markDisconnected('app', first.record.epoch, 5_000);
      expect(await registry.renew('app', first.record.epoch, 10_000)).toBe(false);
    });

    it('release removes only the current epoch, and epochs keep rising after it', async () => {
      const first = await claim('app', 'alice');
      expect(await registry.release('app', first.record.epoch)).toBe(true);
      expect(await registry.lookup('app')).toBeUndefined();
      const again = await claim('app', 'bob');
      expect(again.record.epoch).toBeGreaterThan(first.record.epoch);
    });

    it('lists live and reserved records, never expired ones', async () => {
      await claim('a', 'alice', 1_000);
      const b = await claim('b', 'bob', 10_000);
      await registry.markDisconnected('b', b.record.epoch, 10_000);
      clock.advance(1_001);
      const names = (await registry.list()).map((r) => r.name).sort();
      expect(names).toEqual(['b']);
    });

    it('gives exactly one winner to concurrent claims of one name', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => claim('race', `owner-${i}`)));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      const winner = results.find((r) => r.ok);
      expect((await registry.lookup('race'))?.owner).toBe(winner?.record.owner);
    });

    it('answers ping while open', async () => {
      await expect(registry.ping()).resolves.toBeUndefined();
    });
  });
}
