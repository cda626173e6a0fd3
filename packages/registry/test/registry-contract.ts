import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ClaimResult, SessionRecord, SessionRegistry } from '../src/index.js';
import { createFakeClock, type FakeClock } from './fake-clock.js';

export { createFakeClock, type FakeClock } from './fake-clock.js';

export type RegistryFactory = (
  clock: FakeClock,
) => Promise<{ registry: SessionRegistry; cleanup: () => Promise<void> }>;

const INVALID = { code: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT' };
const CLOSED = { code: 'TUNNEL2_ERR_REGISTRY_CLOSED' };

/** The record of a claim the test expects to succeed (fails the test otherwise). */
function won(result: ClaimResult): SessionRecord {
  if (!result.ok) throw new Error(`expected the claim to succeed, it was refused by ${result.record.owner}`);
  return result.record;
}

/**
 * The behaviour every SessionRegistry implementation must have. Run it for each one (memory now, Redis
 * when it lands) so they cannot drift apart. The factory must build its registry on the given fake clock:
 * the suite moves time by hand and never sleeps. `cleanup` runs after each test, possibly after the test
 * itself closed the registry.
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
      const made = await factory(clock);
      registry = made.registry;
      cleanup = made.cleanup;
    });
    afterEach(() => cleanup());

    describe('claim and lookup', () => {
      it('claims a free name and finds it', async () => {
        const start = clock.now();
        const record = won(await claim('app', 'alice', 10_000, 'node-a'));
        expect(record).toEqual({
          name: 'app',
          owner: 'alice',
          nodeId: 'node-a',
          epoch: record.epoch,
          expiresAt: start + 10_000,
          connected: true,
          account: 'alice',
        });
        expect(Number.isSafeInteger(record.epoch) && record.epoch > 0).toBe(true);
        expect(await registry.lookup('app')).toEqual(record);
        expect(await registry.lookup('other')).toBeUndefined();
      });

      it('hands out snapshots: changing a returned record changes nothing', async () => {
        const record = won(await claim('app', 'alice'));
        (record as { owner: string }).owner = 'mallory';
        const looked = await registry.lookup('app');
        (looked as { connected: boolean }).connected = false;
        expect(await registry.lookup('app')).toMatchObject({ owner: 'alice', connected: true });
      });

      it('keeps names independent', async () => {
        won(await claim('a', 'alice'));
        won(await claim('b', 'bob'));
        expect((await registry.lookup('a'))?.owner).toBe('alice');
        expect((await registry.lookup('b'))?.owner).toBe('bob');
      });
    });

    describe('ownership', () => {
      it('refuses a live name to another owner, returning the record that holds it', async () => {
        const alice = won(await claim('app', 'alice'));
        const result = await claim('app', 'mallory', 10_000, 'node-b');
        expect(result).toEqual({ ok: false, reason: 'owned-by-other', record: alice });
        expect(await registry.lookup('app')).toEqual(alice);
      });

      it('lets the same owner take over with a higher epoch (a reconnect)', async () => {
        const first = won(await claim('app', 'alice', 10_000, 'node-a'));
        clock.advance(1_000);
        const second = won(await claim('app', 'alice', 20_000, 'node-b'));
        expect(second.epoch).toBeGreaterThan(first.epoch);
        expect(second).toMatchObject({ nodeId: 'node-b', expiresAt: clock.now() + 20_000, connected: true });
        expect(await registry.lookup('app')).toEqual(second);
      });

      it('names the live record a takeover replaced, so its node can be told at once', async () => {
        const first = won(await claim('app', 'alice', 10_000, 'node-a'));
        clock.advance(1_000);
        const second = await claim('app', 'alice', 10_000, 'node-b');
        expect(second).toMatchObject({ ok: true, replaced: first });
        // A reservation (the owner was away) is replaced too; its record says it was not connected.
        const third = won(await claim('app', 'alice', 10_000, 'node-c'));
        await registry.markDisconnected('app', third.epoch, 5_000);
        const fourth = await claim('app', 'alice', 10_000, 'node-a');
        expect(fourth).toMatchObject({
          ok: true,
          replaced: { nodeId: 'node-c', epoch: third.epoch, connected: false },
        });
        // A free name, or one whose lease ran out, replaces nothing.
        const fresh = await claim('new', 'alice');
        expect(fresh.ok ? fresh.replaced : 'refused').toBeUndefined();
        clock.advance(20_000);
        const expired = await claim('app', 'alice');
        expect(expired.ok ? expired.replaced : 'refused').toBeUndefined();
      });

      it("records a session's account: the one its latest claim named, in lookups, refusals and takeovers", async () => {
        const at = (account: string | undefined) =>
          registry.claim({
            name: 'app',
            owner: 'key-1',
            nodeId: 'n',
            ttlMs: 10_000,
            ...(account ? { account } : {}),
          });
        const first = won(await at('addr:x'));
        expect(first.account).toBe('addr:x');
        expect(await registry.lookup('app')).toMatchObject({ owner: 'key-1', account: 'addr:x' });
        expect((await registry.list()).find((r) => r.name === 'app')?.account).toBe('addr:x');
        // Another owner is refused with the record, account and all.
        const refused = await registry.claim({
          name: 'app',
          owner: 'key-2',
          account: 'addr:y',
          nodeId: 'n',
          ttlMs: 1,
        });
        expect(refused).toEqual({ ok: false, reason: 'owned-by-other', record: first });
        // Its owner reconnects from elsewhere: the new claim's account replaces the old one.
        const second = await at('addr:z');
        expect(second).toMatchObject({ ok: true, record: { account: 'addr:z' }, replaced: first });
        // A claim naming no account counts against its owner.
        expect(won(await at(undefined)).account).toBe('key-1');
        expect((await registry.lookup('app'))?.account).toBe('key-1');
      });

      it('gives exactly one winner to concurrent claims of one name by different owners', async () => {
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => claim('race', `owner-${i}`)));
        const winners = results.filter((r) => r.ok);
        expect(winners).toHaveLength(1);
        const winner = winners[0]!.record;
        for (const r of results) if (!r.ok) expect(r.record).toEqual(winner);
        expect(await registry.lookup('race')).toEqual(winner);
      });

      it('gives concurrent claims of one owner distinct epochs, the highest one current', async () => {
        const records = (await Promise.all(Array.from({ length: 10 }, () => claim('race', 'alice')))).map(
          won,
        );
        const epochs = records.map((r) => r.epoch);
        expect(new Set(epochs).size).toBe(epochs.length);
        expect((await registry.lookup('race'))?.epoch).toBe(Math.max(...epochs));
      });
    });

    describe('epochs', () => {
      it('a stale epoch cannot renew, disconnect or release the newer session', async () => {
        const first = won(await claim('app', 'alice'));
        const second = won(await claim('app', 'alice'));
        clock.advance(100);
        expect(await registry.renew('app', first.epoch, 60_000)).toBe(false);
        expect(await registry.markDisconnected('app', first.epoch, 60_000)).toBe(false);
        expect(await registry.release('app', first.epoch)).toBe(false);
        expect(await registry.lookup('app')).toEqual(second);
      });

      it('an epoch never handed out acts on nothing', async () => {
        const record = won(await claim('app', 'alice'));
        const bogus = record.epoch + 1_000;
        expect(await registry.renew('app', bogus, 60_000)).toBe(false);
        expect(await registry.markDisconnected('app', bogus, 60_000)).toBe(false);
        expect(await registry.release('app', bogus)).toBe(false);
        expect(await registry.lookup('app')).toEqual(record);
      });

      it('answers false for a name it does not hold', async () => {
        expect(await registry.renew('ghost', 1, 1_000)).toBe(false);
        expect(await registry.markDisconnected('ghost', 1, 1_000)).toBe(false);
        expect(await registry.release('ghost', 1)).toBe(false);
        expect(await registry.lookup('ghost')).toBeUndefined();
      });

      it('release removes only the current epoch; epochs keep rising after it', async () => {
        const first = won(await claim('app', 'alice'));
        expect(await registry.release('app', first.epoch)).toBe(true);
        expect(await registry.lookup('app')).toBeUndefined();
        expect(await registry.release('app', first.epoch)).toBe(false);
        const again = won(await claim('app', 'alice'));
        expect(again.epoch).toBeGreaterThan(first.epoch);
        expect(await registry.release('app', again.epoch)).toBe(true);
        const other = won(await claim('app', 'bob'));
        expect(other.epoch).toBeGreaterThan(again.epoch);
        expect(await registry.release('app', first.epoch)).toBe(false);
        expect(await registry.lookup('app')).toEqual(other);
      });
    });

    describe('leases', () => {
      it('renew extends the lease from now', async () => {
        const record = won(await claim('app', 'alice', 1_000));
        clock.advance(500);
        expect(await registry.renew('app', record.epoch, 2_000)).toBe(true);
        expect(await registry.lookup('app')).toEqual({ ...record, expiresAt: clock.now() + 2_000 });
      });

      it('expires a lease that is not renewed, freeing the name for anyone', async () => {
        const first = won(await claim('app', 'alice', 1_000));
        clock.advance(999);
        expect(await registry.renew('app', first.epoch, 1_000)).toBe(true);
        clock.advance(999);
        expect(await registry.lookup('app')).toBeDefined();
        clock.advance(1);
        // expiresAt is now: a lease ends at its expiry instant, not a millisecond later.
        expect(await registry.lookup('app')).toBeUndefined();
        expect(await registry.list()).toEqual([]);
        const taken = won(await claim('app', 'mallory'));
        expect(taken.epoch).toBeGreaterThan(first.epoch);
      });

      it('an expired lease cannot be renewed, disconnected or released by its old holder', async () => {
        const first = won(await claim('app', 'alice', 1_000));
        clock.advance(1_000);
        expect(await registry.renew('app', first.epoch, 1_000)).toBe(false);
        expect(await registry.markDisconnected('app', first.epoch, 1_000)).toBe(false);
        expect(await registry.release('app', first.epoch)).toBe(false);
        expect(await registry.lookup('app')).toBeUndefined();
        const taken = won(await claim('app', 'mallory'));
        expect(await registry.release('app', first.epoch)).toBe(false);
        expect(await registry.lookup('app')).toEqual(taken);
      });
    });

    describe('renewMany', () => {
      it('answers like renew for each lease, in order, and extends only the current connected ones', async () => {
        const live = won(await claim('live', 'alice', 1_000));
        const stale = won(await claim('taken', 'alice', 1_000));
        const fresh = won(await claim('taken', 'alice', 1_000));
        const reserved = won(await claim('reserved', 'bob', 1_000));
        await registry.markDisconnected('reserved', reserved.epoch, 1_000);
        clock.advance(500);
        const answers = await registry.renewMany(
          [
            { name: 'live', epoch: live.epoch },
            { name: 'taken', epoch: stale.epoch },
            { name: 'reserved', epoch: reserved.epoch },
            { name: 'ghost', epoch: 1 },
            { name: 'taken', epoch: fresh.epoch },
          ],
          2_000,
        );
        expect(answers).toEqual([true, false, false, false, true]);
        expect(await registry.lookup('live')).toEqual({ ...live, expiresAt: clock.now() + 2_000 });
        expect(await registry.lookup('taken')).toEqual({ ...fresh, expiresAt: clock.now() + 2_000 });
        expect(await registry.lookup('reserved')).toMatchObject({
          connected: false,
          expiresAt: clock.now() + 500,
        });
        clock.advance(500);
        expect(await registry.renewMany([{ name: 'reserved', epoch: reserved.epoch }], 2_000)).toEqual([
          false,
        ]);
        expect(await registry.lookup('reserved')).toBeUndefined();
      });

      it('answers [] for no leases', async () => {
        expect(await registry.renewMany([], 1_000)).toEqual([]);
      });

      it('rejects an invalid lease or ttl with INVALID_ARGUMENT and changes nothing', async () => {
        const record = won(await claim('app', 'alice', 1_000));
        const good = { name: 'app', epoch: record.epoch };
        await expect(registry.renewMany([good, { name: '', epoch: 1 }], 5_000)).rejects.toMatchObject(
          INVALID,
        );
        await expect(registry.renewMany([good, { name: 'x', epoch: 0 }], 5_000)).rejects.toMatchObject(
          INVALID,
        );
        await expect(registry.renewMany([good], 0)).rejects.toMatchObject(INVALID);
        expect(await registry.lookup('app')).toEqual(record);
      });
    });

    describe('disconnect and grace', () => {
      it('keeps a disconnected name for its owner only, until the grace ends', async () => {
        const first = won(await claim('app', 'alice'));
        expect(await registry.markDisconnected('app', first.epoch, 5_000)).toBe(true);
        const reserved = { ...first, connected: false, expiresAt: clock.now() + 5_000 };
        expect(await registry.lookup('app')).toEqual(reserved);
        expect(await claim('app', 'mallory')).toEqual({
          ok: false,
          reason: 'owned-by-other',
          record: reserved,
        });
        clock.advance(4_000);
        const back = won(await claim('app', 'alice', 10_000, 'node-b'));
        expect(back).toMatchObject({ connected: true, nodeId: 'node-b' });
        expect(back.epoch).toBeGreaterThan(first.epoch);
        expect(await registry.markDisconnected('app', back.epoch, 5_000)).toBe(true);
        clock.advance(4_999);
        expect((await claim('app', 'mallory')).ok).toBe(false);
        clock.advance(1);
        expect(await registry.lookup('app')).toBeUndefined();
        expect(won(await claim('app', 'mallory')).epoch).toBeGreaterThan(back.epoch);
      });

      it('a disconnected session cannot be renewed back to life', async () => {
        const first = won(await claim('app', 'alice'));
        await registry.markDisconnected('app', first.epoch, 5_000);
        expect(await registry.renew('app', first.epoch, 10_000)).toBe(false);
        expect(await registry.lookup('app')).toMatchObject({
          connected: false,
          expiresAt: clock.now() + 5_000,
        });
      });

      it('a replaced connection closing late does not turn the new one into a reservation', async () => {
        const old = won(await claim('app', 'alice', 10_000, 'node-a'));
        const fresh = won(await claim('app', 'alice', 10_000, 'node-b'));
        expect(await registry.markDisconnected('app', old.epoch, 60_000)).toBe(false);
        expect(await registry.release('app', old.epoch)).toBe(false);
        expect(await registry.lookup('app')).toEqual(fresh);
      });

      it('a grace of 0 frees the name at once', async () => {
        const first = won(await claim('app', 'alice'));
        expect(await registry.markDisconnected('app', first.epoch, 0)).toBe(true);
        expect(await registry.lookup('app')).toBeUndefined();
        expect((await claim('app', 'mallory')).ok).toBe(true);
      });

      it('the owner may release its reservation early', async () => {
        const first = won(await claim('app', 'alice'));
        await registry.markDisconnected('app', first.epoch, 60_000);
        expect(await registry.release('app', first.epoch)).toBe(true);
        expect((await claim('app', 'mallory')).ok).toBe(true);
      });
    });

    describe('list', () => {
      it('lists live and reserved records, never expired or released ones', async () => {
        expect(await registry.list()).toEqual([]);
        won(await claim('short', 'alice', 1_000));
        const reserved = won(await claim('reserved', 'bob', 10_000));
        await registry.markDisconnected('reserved', reserved.epoch, 10_000);
        const live = won(await claim('live', 'carol', 10_000, 'node-b'));
        const released = won(await claim('released', 'dave', 10_000));
        await registry.release('released', released.epoch);
        clock.advance(1_000);
        const listed = (await registry.list()).sort((a, b) => a.name.localeCompare(b.name));
        expect(listed).toEqual([live, { ...reserved, connected: false, expiresAt: clock.now() + 9_000 }]);
      });

      it('hands out snapshots', async () => {
        won(await claim('app', 'alice'));
        const [record] = await registry.list();
        (record as { owner: string }).owner = 'mallory';
        expect((await registry.lookup('app'))?.owner).toBe('alice');
      });
    });

    describe('listOwned', () => {
      it("lists an owner's live and reserved names of one key space, not another owner's or space's", async () => {
        const byPort = (records: SessionRecord[]) => records.map((r) => r.name).sort();
        expect(await registry.listOwned('alice', 'tcp')).toEqual([]);
        const a = won(await claim('tcp:20000', 'alice', 10_000, 'node-a'));
        const b = won(await claim('tcp:20001', 'alice', 10_000, 'node-b'));
        won(await claim('tcp:20002', 'alice', 1_000));
        won(await claim('tcp:20003', 'bob'));
        won(await claim('app', 'alice'));
        won(await claim('udp:20000', 'alice'));
        await registry.markDisconnected('tcp:20001', b.epoch, 10_000);
        clock.advance(1_000);
        const owned = await registry.listOwned('alice', 'tcp');
        expect(byPort(owned)).toEqual(['tcp:20000', 'tcp:20001']);
        expect(owned.find((r) => r.name === 'tcp:20000')).toEqual(a);
        expect(owned.find((r) => r.name === 'tcp:20001')?.connected).toBe(false);
        expect(byPort(await registry.listOwned('bob', 'tcp'))).toEqual(['tcp:20003']);
      });

      it('forgets a released name, and one another owner took after it expired', async () => {
        won(await claim('tcp:20000', 'alice', 1_000));
        won(await claim('tcp:20001', 'alice', 10_000));
        const c = won(await claim('tcp:20002', 'alice', 10_000));
        await registry.release('tcp:20002', c.epoch);
        clock.advance(1_000);
        won(await claim('tcp:20000', 'bob'));
        expect((await registry.listOwned('alice', 'tcp')).map((r) => r.name)).toEqual(['tcp:20001']);
        expect((await registry.listOwned('alice', 'tcp')).map((r) => r.name)).toEqual(['tcp:20001']);
      });

      it('counts a claim against the account it names (anonymous agents: their address), not its owner', async () => {
        const byPort = (records: SessionRecord[]) => records.map((r) => r.name).sort();
        const first = won(
          await registry.claim({
            name: 'tcp:1',
            owner: 'key-1',
            account: 'addr:x',
            nodeId: 'n',
            ttlMs: 10_000,
          }),
        );
        won(
          await registry.claim({
            name: 'tcp:2',
            owner: 'key-2',
            account: 'addr:x',
            nodeId: 'n',
            ttlMs: 10_000,
          }),
        );
        won(await registry.claim({ name: 'tcp:3', owner: 'key-1', nodeId: 'n', ttlMs: 10_000 }));
        await registry.markDisconnected('tcp:1', first.epoch, 10_000);
        // A reservation still counts: a port in its grace is held as surely as a live one.
        expect(byPort(await registry.listOwned('addr:x', 'tcp'))).toEqual(['tcp:1', 'tcp:2']);
        expect(byPort(await registry.listOwned('key-1', 'tcp'))).toEqual(['tcp:3']);
        expect(await registry.listOwned('key-2', 'tcp')).toEqual([]);
        // The records say who holds them and whom they count against.
        expect(await registry.lookup('tcp:2')).toMatchObject({ owner: 'key-2', account: 'addr:x' });
        expect(await registry.lookup('tcp:3')).toMatchObject({ owner: 'key-1', account: 'key-1' });
      });

      it("moves a name to the account of its owner's latest claim, and forgets what ran out", async () => {
        won(
          await registry.claim({ name: 'tcp:1', owner: 'k', account: 'addr:x', nodeId: 'n', ttlMs: 1_000 }),
        );
        // Its owner reconnects from elsewhere: the port counts against the new address only.
        won(
          await registry.claim({ name: 'tcp:1', owner: 'k', account: 'addr:y', nodeId: 'n', ttlMs: 1_000 }),
        );
        expect(await registry.listOwned('addr:x', 'tcp')).toEqual([]);
        expect((await registry.listOwned('addr:y', 'tcp')).map((r) => r.name)).toEqual(['tcp:1']);
        clock.advance(1_000);
        expect(await registry.listOwned('addr:y', 'tcp')).toEqual([]);
      });

      it('rejects a space with a colon and an empty owner', async () => {
        await expect(registry.listOwned('alice', 'tcp:1')).rejects.toMatchObject(INVALID);
        await expect(registry.listOwned('', 'tcp')).rejects.toMatchObject(INVALID);
        await expect(registry.listOwned('alice', '')).rejects.toMatchObject(INVALID);
      });
    });

    describe('arguments', () => {
      it('rejects malformed claims with INVALID_ARGUMENT and keeps nothing', async () => {
        const base = { name: 'app', owner: 'alice', nodeId: 'node-a', ttlMs: 1_000 };
        for (const bad of [
          { name: '' },
          { owner: '' },
          { nodeId: '' },
          { ttlMs: 0 },
          { ttlMs: -1 },
          { ttlMs: Number.NaN },
          { ttlMs: Number.POSITIVE_INFINITY },
          { account: '' },
        ]) {
          await expect(registry.claim({ ...base, ...bad })).rejects.toMatchObject(INVALID);
        }
        expect(await registry.list()).toEqual([]);
      });

      it('rejects malformed epochs and durations with INVALID_ARGUMENT', async () => {
        const record = won(await claim('app', 'alice'));
        await expect(registry.renew('app', 0, 1_000)).rejects.toMatchObject(INVALID);
        await expect(registry.renew('app', 1.5, 1_000)).rejects.toMatchObject(INVALID);
        await expect(registry.renew('app', record.epoch, 0)).rejects.toMatchObject(INVALID);
        await expect(registry.markDisconnected('app', record.epoch, -1)).rejects.toMatchObject(INVALID);
        await expect(registry.release('', record.epoch)).rejects.toMatchObject(INVALID);
        await expect(registry.lookup('')).rejects.toMatchObject(INVALID);
        expect(await registry.lookup('app')).toEqual(record);
      });
    });

    describe('node directory', () => {
      it('finds an announced node until its announcement expires; a repeat renews or moves it', async () => {
        const start = clock.now();
        await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 10_000 });
        expect(await registry.lookupNode('node-a')).toEqual({
          nodeId: 'node-a',
          url: 'http://10.0.0.1:8080',
          expiresAt: start + 10_000,
        });
        expect(await registry.lookupNode('node-b')).toBeUndefined();
        clock.advance(9_000);
        await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.2:8080', ttlMs: 10_000 });
        clock.advance(9_000);
        expect((await registry.lookupNode('node-a'))?.url).toBe('http://10.0.0.2:8080');
        clock.advance(1_000);
        expect(await registry.lookupNode('node-a')).toBeUndefined();
      });

      it("returns a node's signature as announced, and none when it announced none", async () => {
        await registry.announceNode({
          nodeId: 'node-a',
          url: 'http://10.0.0.1:8080',
          ttlMs: 10_000,
          signature: 'v2 1 10000 abc',
        });
        expect((await registry.lookupNode('node-a'))?.signature).toBe('v2 1 10000 abc');
        await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 10_000 });
        expect(await registry.lookupNode('node-a')).not.toHaveProperty('signature');
        await expect(
          registry.announceNode({
            nodeId: 'node-a',
            url: 'http://10.0.0.1:8080',
            ttlMs: 10_000,
            signature: 'x'.repeat(513),
          }),
        ).rejects.toMatchObject({ code: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT' });
      });

      it('withdraws a node: gone at once, false when there was none', async () => {
        await registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 10_000 });
        expect(await registry.withdrawNode('node-a')).toBe(true);
        expect(await registry.lookupNode('node-a')).toBeUndefined();
        expect(await registry.withdrawNode('node-a')).toBe(false);
      });

      it('keeps nodes and sessions apart: a node and a session may share a string', async () => {
        await registry.announceNode({ nodeId: 'app', url: 'http://10.0.0.1:8080', ttlMs: 10_000 });
        won(await claim('app', 'alice'));
        expect((await registry.lookupNode('app'))?.url).toBe('http://10.0.0.1:8080');
        expect((await registry.lookup('app'))?.owner).toBe('alice');
        expect(await registry.list()).toHaveLength(1);
      });

      it('refuses invalid announcements and node ids', async () => {
        await expect(
          registry.announceNode({ nodeId: '', url: 'http://10.0.0.1:8080', ttlMs: 1_000 }),
        ).rejects.toMatchObject(INVALID);
        await expect(
          registry.announceNode({ nodeId: 'node-a', url: 'not a url', ttlMs: 1_000 }),
        ).rejects.toMatchObject(INVALID);
        await expect(
          registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 0 }),
        ).rejects.toMatchObject(INVALID);
        await expect(registry.lookupNode('')).rejects.toMatchObject(INVALID);
        await expect(registry.withdrawNode('')).rejects.toMatchObject(INVALID);
      });
    });

    describe('lifecycle', () => {
      it('answers ping while open', async () => {
        await expect(registry.ping()).resolves.toBeUndefined();
      });

      it('refuses every call once closed, and close is idempotent', async () => {
        const record = won(await claim('app', 'alice'));
        await registry.close();
        await registry.close();
        await expect(registry.ping()).rejects.toMatchObject(CLOSED);
        await expect(claim('app', 'alice')).rejects.toMatchObject(CLOSED);
        await expect(registry.renew('app', record.epoch, 1_000)).rejects.toMatchObject(CLOSED);
        await expect(registry.renewMany([{ name: 'app', epoch: record.epoch }], 1_000)).rejects.toMatchObject(
          CLOSED,
        );
        await expect(registry.markDisconnected('app', record.epoch, 1_000)).rejects.toMatchObject(CLOSED);
        await expect(registry.release('app', record.epoch)).rejects.toMatchObject(CLOSED);
        await expect(registry.lookup('app')).rejects.toMatchObject(CLOSED);
        await expect(registry.list()).rejects.toMatchObject(CLOSED);
        await expect(
          registry.announceNode({ nodeId: 'node-a', url: 'http://10.0.0.1:8080', ttlMs: 1_000 }),
        ).rejects.toMatchObject(CLOSED);
        await expect(registry.lookupNode('node-a')).rejects.toMatchObject(CLOSED);
        await expect(registry.withdrawNode('node-a')).rejects.toMatchObject(CLOSED);
      });
    });
  });
}
