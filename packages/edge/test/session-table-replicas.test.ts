import { ErrorCode } from '@tunnel2/protocol';
import { createMemoryRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SessionTable } from '../src/agents/session-table.js';
import type { TunnelEntry } from '../src/agents/tunnel-entry.js';

// A name served by several replicas (session-table.ts, replica-choice.ts): who may join, what the registry
// is told as they come and go, and which one the next request goes to.

interface FakeReplica {
  name: string;
  epoch: number;
  owner: string;
  account: string;
  replica: boolean;
  leaving: boolean;
  ready: boolean;
  tag: 0;
  connection: { run: string | undefined };
  session: { draining: boolean; closed: boolean; streams: Map<number, unknown> };
  slots: { waiting: number };
  closedWith: number | undefined;
  close(code: number): void;
}

function fake(epoch: number, options: { owner?: string; replica?: boolean; run?: string } = {}): FakeReplica {
  const entry: FakeReplica = {
    name: 'shop',
    epoch,
    owner: options.owner ?? 'owner-a',
    account: options.owner ?? 'owner-a',
    replica: options.replica ?? true,
    leaving: false,
    ready: true,
    tag: 0,
    connection: { run: options.run },
    session: { draining: false, closed: false, streams: new Map() },
    slots: { waiting: 0 },
    closedWith: undefined,
    close(code) {
      entry.closedWith = code;
    },
  };
  return entry;
}

const as = (entry: FakeReplica): TunnelEntry => entry as unknown as TunnelEntry;

const tables: SessionTable[] = [];
afterEach(() => {
  for (const table of tables.splice(0)) table.close();
});

function table() {
  const registry = createMemoryRegistry();
  const sessions = new SessionTable({
    registry,
    nodeId: 'node-1',
    leaseTtlMs: 60_000,
    reconnectGraceMs: 30_000,
    maxArrivalWaiters: 10,
    logger: pino({ level: 'silent' }),
  });
  tables.push(sessions);
  return { registry, sessions };
}

describe('SessionTable with replicas', () => {
  it('a replica of the same owner joins under the claim the others hold; no other owner, no non-replica', async () => {
    const { sessions } = table();
    const admitted = await sessions.admit('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    expect(sessions.joinable('shop', 'owner-a')).toBeUndefined(); // nobody serves it yet
    sessions.activate(as(fake(admitted.epoch)));
    expect(sessions.joinable('shop', 'owner-a')).toBe(admitted.epoch);
    expect(sessions.joinable('shop', 'owner-b')).toBeUndefined();
    const second = fake(admitted.epoch);
    expect(sessions.activate(as(second), true)).toBe(true);
    expect(sessions.replicas('shop')).toHaveLength(2);
    expect(sessions.size).toBe(2);
    expect(sessions.names).toBe(1);

    const { sessions: other } = table();
    const alone = await other.admit('shop', 'owner-a');
    if (!alone.ok) throw new Error('claim refused');
    other.activate(as(fake(alone.epoch, { replica: false })));
    expect(other.joinable('shop', 'owner-a')).toBeUndefined();
  });

  it('the name stays claimed while one replica lives; the last one leaving starts the reconnect grace', async () => {
    const { registry, sessions } = table();
    const admitted = await sessions.admit('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const a = fake(admitted.epoch);
    const b = fake(admitted.epoch);
    sessions.activate(as(a));
    sessions.activate(as(b), true);
    await sessions.deactivate(as(a));
    expect((await registry.lookup('shop'))?.connected).toBe(true);
    expect(sessions.replicas('shop')).toEqual([b]);
    await sessions.deactivate(as(b));
    const record = await registry.lookup('shop');
    expect(record?.connected).toBe(false);
    expect(sessions.get('shop')).toBeUndefined();
  });

  it('a joined replica whose replicas all left meanwhile is closed to claim afresh', async () => {
    const { sessions } = table();
    const late = fake(7);
    expect(sessions.activate(as(late), true)).toBe(false);
    expect(late.closedWith).toBe(ErrorCode.GOING_AWAY);
    expect(sessions.get('shop')).toBeUndefined();
  });

  it('the same run reconnecting replaces only its own older connection', async () => {
    const { sessions } = table();
    const a = fake(1, { run: 'run-a' });
    const b = fake(1, { run: 'run-b' });
    const again = fake(1, { run: 'run-a' });
    sessions.activate(as(a));
    sessions.activate(as(b), true);
    sessions.activate(as(again), true);
    expect(a.closedWith).toBe(ErrorCode.SESSION_REPLACED);
    expect(b.closedWith).toBeUndefined();
    expect(sessions.replicas('shop')).toEqual([b, again]);
  });

  it('a non-replica of the same owner takes the name over from every replica, as a takeover does today', () => {
    const { sessions } = table();
    const a = fake(1);
    const b = fake(1);
    sessions.activate(as(a));
    sessions.activate(as(b), true);
    const exclusive = fake(2, { replica: false });
    sessions.activate(as(exclusive));
    expect([a.closedWith, b.closedWith]).toEqual([ErrorCode.SESSION_REPLACED, ErrorCode.SESSION_REPLACED]);
    expect(sessions.replicas('shop')).toEqual([exclusive]);
  });

  it('the next request goes to the fewest outstanding; ties rotate; a draining replica or the avoided one gets none', () => {
    const { sessions } = table();
    const [a, b, c] = [fake(1), fake(1), fake(1)];
    sessions.activate(as(a));
    sessions.activate(as(b), true);
    sessions.activate(as(c), true);
    const picks = new Set(Array.from({ length: 6 }, () => sessions.get('shop')));
    expect(picks).toEqual(new Set([a, b, c]));
    a.session.streams.set(1, {});
    b.slots.waiting = 1;
    expect(Array.from({ length: 4 }, () => sessions.get('shop'))).toEqual([c, c, c, c]);
    c.session.draining = true;
    // a and b tie at one outstanding each
    expect(new Set(Array.from({ length: 4 }, () => sessions.get('shop')))).toEqual(new Set([a, b]));
    expect(Array.from({ length: 4 }, () => sessions.get('shop', as(a)))).toEqual([b, b, b, b]);
    a.session.draining = true;
    b.session.draining = true;
    // None can take it: the newest is returned and the caller answers as for one draining agent.
    expect(sessions.get('shop')).toBe(c);
  });
});

describe('SessionTable with replicas in cluster mode (a place per node in the replica set)', () => {
  function clusterTable(leaseTtlMs = 60_000) {
    const registry = createMemoryRegistry();
    const sessions = new SessionTable({
      registry,
      replicaSets: registry,
      nodeId: 'node-1',
      leaseTtlMs,
      reconnectGraceMs: 30_000,
      maxArrivalWaiters: 10,
      logger: pino({ level: 'silent' }),
    });
    tables.push(sessions);
    return { registry, sessions };
  }

  it("claims this node's place; it goes with the last replica here, at once when they all drain", async () => {
    const { registry, sessions } = clusterTable();
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const first = fake(admitted.epoch);
    const second = fake(admitted.epoch);
    sessions.activate(as(first));
    sessions.activate(as(second), true);
    expect((await registry.lookupReplicas('shop'))?.holders).toEqual([
      expect.objectContaining({ nodeId: 'node-1', epoch: admitted.epoch }),
    ]);
    expect(await registry.lookup('shop')).toBeUndefined(); // no exclusive record
    await sessions.deactivate(as(first));
    expect(await registry.lookupReplicas('shop')).toBeDefined();
    second.leaving = true;
    sessions.draining(as(second));
    await vi.waitFor(async () => expect(await registry.lookupReplicas('shop')).toBeUndefined());
  });

  it('another owner is refused with or without a replica; its live replica set refuses an exclusive claim', async () => {
    const { sessions } = clusterTable();
    expect((await sessions.admitReplica('shop', 'owner-a')).ok).toBe(true);
    expect((await sessions.admitReplica('shop', 'owner-b')).ok).toBe(false);
    expect((await sessions.admit('shop', 'owner-b')).ok).toBe(false);
  });

  it('a place the registry lost is claimed again at the next round; one another owner took closes the replicas', async () => {
    const { registry, sessions } = clusterTable(750);
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const entry = fake(admitted.epoch);
    sessions.activate(as(entry));
    await registry.releaseReplica('shop', 'node-1', admitted.epoch); // as a Redis restarted empty
    await vi.waitFor(() => expect(entry.epoch).toBeGreaterThan(admitted.epoch), { timeout: 5_000 });
    expect((await registry.lookupReplicas('shop'))?.holders[0]?.epoch).toBe(entry.epoch);
    await registry.releaseReplica('shop', 'node-1', entry.epoch);
    expect(
      (await registry.claim({ name: 'shop', owner: 'owner-b', nodeId: 'node-2', ttlMs: 60_000 })).ok,
    ).toBe(true);
    await vi.waitFor(() => expect(entry.closedWith).toBe(ErrorCode.GOING_AWAY), { timeout: 5_000 });
  });

  it('a replica never joins, without a claim, a place its draining fellows gave up (another owner may hold it now)', async () => {
    const { registry, sessions } = clusterTable();
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const entry = fake(admitted.epoch);
    sessions.activate(as(entry));
    // Its agent said GOAWAY with a code other than GOING_AWAY: draining, not leaving.
    entry.session.draining = true;
    sessions.draining(as(entry));
    await vi.waitFor(async () => expect(await registry.lookupReplicas('shop')).toBeUndefined());
    expect(
      (await registry.claim({ name: 'shop', owner: 'owner-b', nodeId: 'node-2', ttlMs: 60_000 })).ok,
    ).toBe(true);
    // Owner A's next replica here must claim (and be refused), not share owner B's name.
    expect(sessions.joinable('shop', 'owner-a')).toBeUndefined();
    expect((await sessions.admitReplica('shop', 'owner-a')).ok).toBe(false);
  });

  it('the last holder anywhere losing its last replica without a GOAWAY keeps its place for the reconnect grace', async () => {
    const { registry, sessions } = clusterTable();
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const entry = fake(admitted.epoch);
    sessions.activate(as(entry));
    await sessions.deactivate(as(entry)); // its WebSocket dropped: the agent reconnects
    const holders = (await registry.lookupReplicas('shop'))?.holders;
    expect(holders).toEqual([expect.objectContaining({ nodeId: 'node-1', epoch: admitted.epoch })]);
    // As on one edge: no other owner takes the name while its agent comes back; the owner's does.
    expect((await sessions.admit('shop', 'owner-b')).ok).toBe(false);
    expect((await sessions.admitReplica('shop', 'owner-b')).ok).toBe(false);
    expect((await sessions.admitReplica('shop', 'owner-a')).ok).toBe(true);
  });

  it('a holder beside other live holders, or a last replica that said GOAWAY, releases its place at once', async () => {
    const { registry, sessions } = clusterTable();
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const entry = fake(admitted.epoch);
    sessions.activate(as(entry));
    const other = await registry.claimReplica({
      name: 'shop',
      owner: 'owner-a',
      nodeId: 'node-2',
      ttlMs: 60_000,
    });
    await sessions.deactivate(as(entry));
    expect((await registry.lookupReplicas('shop'))?.holders.map((h) => h.nodeId)).toEqual(['node-2']);
    if (!other.ok) throw new Error('claim refused');
    await registry.releaseReplica('shop', 'node-2', other.holder.epoch);
    const again = await sessions.admitReplica('shop', 'owner-a');
    if (!again.ok) throw new Error('claim refused');
    const leaving = fake(again.epoch);
    sessions.activate(as(leaving));
    leaving.leaving = true;
    await sessions.deactivate(as(leaving));
    expect(await registry.lookupReplicas('shop')).toBeUndefined();
  });

  it('a place kept for the grace goes at the next round once the agents came back on another node', async () => {
    const { registry, sessions } = clusterTable(750);
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const entry = fake(admitted.epoch);
    sessions.activate(as(entry));
    await sessions.deactivate(as(entry));
    expect((await registry.lookupReplicas('shop'))?.holders.map((h) => h.nodeId)).toEqual(['node-1']);
    // Its agent reconnected through node-2: node-1's kept place would only draw requests it cannot serve.
    await registry.claimReplica({ name: 'shop', owner: 'owner-a', nodeId: 'node-2', ttlMs: 60_000 });
    await vi.waitFor(
      async () =>
        expect((await registry.lookupReplicas('shop'))?.holders.map((h) => h.nodeId)).toEqual(['node-2']),
      { timeout: 5_000 },
    );
  });

  it('a registry outage logs once for all the places it fails to renew, not once per name per round', async () => {
    const lines: string[] = [];
    const registry = createMemoryRegistry();
    const sessions = new SessionTable({
      registry,
      replicaSets: registry,
      nodeId: 'node-1',
      leaseTtlMs: 750,
      reconnectGraceMs: 30_000,
      maxArrivalWaiters: 10,
      logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
    });
    tables.push(sessions);
    for (const name of ['shop', 'blog', 'docs']) {
      const admitted = await sessions.admitReplica(name, 'owner-a');
      if (!admitted.ok) throw new Error('claim refused');
      sessions.activate(as({ ...fake(admitted.epoch), name }));
    }
    // And two places kept for the grace (their last replica dropped), checked each round too.
    for (const name of ['kept-1', 'kept-2']) {
      const admitted = await sessions.admitReplica(name, 'owner-a');
      if (!admitted.ok) throw new Error('claim refused');
      const entry = as({ ...fake(admitted.epoch), name });
      sessions.activate(entry);
      await sessions.deactivate(entry);
    }
    await registry.close(); // every call fails from now on, as an unreachable Redis does
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // four rounds or so
    // One line for the places renewed, one for those kept.
    expect(lines.length).toBe(2);
  });

  it("a node's first replica of a name is told the other nodes' places at once, not a lease round later", async () => {
    const { registry, sessions } = clusterTable(); // a 60 s lease: no round within this test
    await registry.claimReplica({ name: 'shop', owner: 'owner-a', nodeId: 'node-2', ttlMs: 60_000 });
    const admitted = await sessions.admitReplica('shop', 'owner-a');
    if (!admitted.ok) throw new Error('claim refused');
    const told: number[] = [];
    const entry = fake(admitted.epoch);
    const withTell = { ...entry, connection: { run: undefined, tellReplicas: (n: number) => told.push(n) } };
    sessions.activate(as(withTell as unknown as FakeReplica));
    await vi.waitFor(() => expect(told.at(-1)).toBe(2), { timeout: 2_000 });
  });
});
