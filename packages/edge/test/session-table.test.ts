import { ErrorCode } from '@tunnel2/protocol';
import {
  type ClaimInput,
  type ClaimResult,
  createMemoryRegistry,
  type MemoryRegistry,
  type SessionRecord,
  type SessionRegistry,
} from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConnection } from '../src/agents/agent-connection.js';
import { REASSERT_CONCURRENCY, SessionTable } from '../src/agents/session-table.js';

/** The part of a connection the table uses: its name, epoch, owner, account, and close(). */
interface FakeConnection {
  name: string;
  epoch: number;
  owner: string;
  account: string;
  closed: Promise<number>;
}

function fakeConnection(name: string, epoch: number, owner: string, account = owner): FakeConnection {
  let closedWith: (code: number) => void = () => {};
  const closed = new Promise<number>((resolve) => {
    closedWith = resolve;
  });
  return { name, epoch, owner, account, closed, close: (code: number) => closedWith(code) } as FakeConnection;
}

const asConnection = (fake: FakeConnection): AgentConnection => fake as unknown as AgentConnection;

/**
 * The memory registry seen through the calls a table makes: counts lookups in flight, tells a test about
 * each claim, and runs `afterLookup` once a lookup has its answer (what another node did meanwhile).
 */
class WatchedRegistry {
  readonly inner: MemoryRegistry = createMemoryRegistry();
  inFlight = 0;
  maxInFlight = 0;
  afterLookup: ((name: string) => Promise<void>) | undefined;
  readonly claims: SessionRecord[] = [];
  #claimWaiters: Array<() => void> = [];

  get registry(): SessionRegistry {
    return {
      ...this.inner,
      claim: (input: ClaimInput) => this.#claim(input),
      lookup: (name: string) => this.#lookup(name),
      renewMany: (leases, ttlMs) => this.inner.renewMany(leases, ttlMs),
      release: (name, epoch) => this.inner.release(name, epoch),
    };
  }

  /** Resolves once `count` claims have been made through the table. */
  async claimed(count: number): Promise<void> {
    while (this.claims.length < count) await new Promise<void>((resolve) => this.#claimWaiters.push(resolve));
  }

  async #claim(input: ClaimInput): Promise<ClaimResult> {
    const result = await this.inner.claim(input);
    if (result.ok) this.claims.push(result.record);
    for (const wake of this.#claimWaiters.splice(0)) wake();
    return result;
  }

  async #lookup(name: string): Promise<SessionRecord | undefined> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      // A turn of the event loop, so that lookups started together are in flight together.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const record = await this.inner.lookup(name);
      const after = this.afterLookup;
      this.afterLookup = undefined;
      if (after !== undefined) await after(name);
      return record;
    } finally {
      this.inFlight--;
    }
  }
}

const logger = pino({ level: 'silent' });
const tables: SessionTable[] = [];

function table(watched: WatchedRegistry, nodeId: string): SessionTable {
  const created = new SessionTable({
    registry: watched.registry,
    nodeId,
    leaseTtlMs: 750,
    reconnectGraceMs: 1_000,
    maxArrivalWaiters: 8,
    logger,
  });
  tables.push(created);
  return created;
}

afterEach(() => {
  for (const t of tables.splice(0)) t.close();
});

describe('SessionTable re-asserting lost leases', () => {
  it('yields to a claim made on another node between its lookup and its claim', async () => {
    const watched = new WatchedRegistry();
    const a = table(watched, 'node-a');
    const b = table(watched, 'node-b');
    const first = await a.admit('app', 'owner-1');
    if (!first.ok) throw new Error('claim refused');
    const onA = fakeConnection('app', first.epoch, 'owner-1');
    a.activate(asConnection(onA));
    // Redis restarted empty: node A's lease is gone. Between A's lookup (nothing) and A's claim, the same
    // agent reconnects through node B.
    await watched.inner.release('app', first.epoch);
    const onB = fakeConnection('app', 0, 'owner-1');
    watched.afterLookup = async () => {
      const second = await b.admit('app', 'owner-1');
      if (!second.ok) throw new Error('claim refused');
      onB.epoch = second.epoch;
      b.activate(asConnection(onB));
    };
    // A's connection is the older one: it closes as replaced (never B's, the newer one).
    const firstClosed = await Promise.race([
      onA.closed.then((code) => ({ on: 'node-a', code })),
      onB.closed.then((code) => ({ on: 'node-b', code })),
    ]);
    expect(firstClosed).toEqual({ on: 'node-a', code: ErrorCode.SESSION_REPLACED });
    expect(a.get('app')).toBeUndefined();
    // A released its claim; B's next renewal finds nothing and claims the name again for itself.
    await watched.claimed(4);
    const record = await watched.inner.lookup('app');
    expect(record?.nodeId).toBe('node-b');
    expect(record?.epoch).toBe(onB.epoch);
    expect(b.get('app')).toBe(asConnection(onB));
    const stillOpen = await Promise.race([onB.closed, Promise.resolve('open')]);
    expect(stillOpen).toBe('open');
  });

  it("claims and re-asserts a session under its account (an anonymous agent's address), not its agent key", async () => {
    const watched = new WatchedRegistry();
    const a = table(watched, 'node-a');
    const admitted = await a.admit('app', 'key-1', 'addr:192.0.2.1');
    if (!admitted.ok) throw new Error('claim refused');
    expect(await watched.inner.lookup('app')).toMatchObject({ owner: 'key-1', account: 'addr:192.0.2.1' });
    a.activate(asConnection(fakeConnection('app', admitted.epoch, 'key-1', 'addr:192.0.2.1')));
    // Redis restarted empty: the lease claimed again is the same account's, so its link share stays one.
    await watched.inner.release('app', admitted.epoch);
    await watched.claimed(2);
    expect(await watched.inner.lookup('app')).toMatchObject({ owner: 'key-1', account: 'addr:192.0.2.1' });
  });

  it('re-asserts many lost leases in parallel, a bounded number at a time', async () => {
    const watched = new WatchedRegistry();
    const a = table(watched, 'node-a');
    const count = REASSERT_CONCURRENCY * 2 + 5;
    const fakes: FakeConnection[] = [];
    for (let i = 0; i < count; i++) {
      const admitted = await a.admit(`s${i}`, 'owner-1');
      if (!admitted.ok) throw new Error('claim refused');
      const fake = fakeConnection(`s${i}`, admitted.epoch, 'owner-1');
      fakes.push(fake);
      a.activate(asConnection(fake));
    }
    // Redis restarted empty: every lease is gone at once.
    for (const fake of fakes) await watched.inner.release(fake.name, fake.epoch);
    const before = watched.claims.length;
    await watched.claimed(before + count);
    expect(watched.maxInFlight).toBeGreaterThan(1);
    expect(watched.maxInFlight).toBeLessThanOrEqual(REASSERT_CONCURRENCY);
    for (const fake of fakes) {
      const record = await watched.inner.lookup(fake.name);
      expect(record?.nodeId).toBe('node-a');
      expect(a.get(fake.name)).toBe(asConnection(fake));
    }
  });
});
