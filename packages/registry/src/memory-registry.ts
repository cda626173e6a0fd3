import { type Clock, systemClock } from './clock.js';
import { RegistryError, RegistryErrorCode } from './errors.js';
import {
  checkClaimInput,
  checkEpoch,
  checkGrace,
  checkHeldLeases,
  checkName,
  checkNodeAnnouncement,
  checkNodeId,
  checkOwner,
  checkSpace,
  checkTtl,
} from './registry-arguments.js';
import type { ReplicaClaimResult, ReplicaHolder, ReplicaSet, ReplicaSetRegistry } from './replica-sets.js';
import type {
  ClaimInput,
  ClaimResult,
  NodeRecord,
  SessionRecord,
  SessionRegistry,
} from './session-registry.js';

export interface MemoryRegistryOptions {
  /** Time source for leases; default `Date.now`. */
  clock?: Clock;
  /**
   * How often expired records are swept from memory; default 30 s. This only bounds memory: a record is
   * invisible from the moment it expires.
   */
  sweepIntervalMs?: number;
}

interface ResolvedMemoryRegistryOptions {
  clock: Clock;
  sweepIntervalMs: number;
}

export const DEFAULT_SWEEP_INTERVAL_MS = 30_000;

function resolveMemoryRegistryOptions(options: MemoryRegistryOptions = {}): ResolvedMemoryRegistryOptions {
  const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
  if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 1 || sweepIntervalMs > 2_147_483_647) {
    throw new RegistryError(
      RegistryErrorCode.INVALID_ARGUMENT,
      `sweepIntervalMs must be an integer in [1, 2147483647], got ${sweepIntervalMs}`,
    );
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new RegistryError(RegistryErrorCode.INVALID_ARGUMENT, 'clock must be a function returning ms');
  }
  return { clock: options.clock ?? systemClock, sweepIntervalMs };
}

/** The memory registry, plus what only makes sense in one process. */
export interface MemoryRegistry extends SessionRegistry, ReplicaSetRegistry {
  /** Records held in memory, including expired ones not swept yet (diagnostics and tests). */
  readonly size: number;
}

/** A record as kept: every field set (the account too). */
type MutableRecord = { -readonly [K in keyof SessionRecord]-?: SessionRecord[K] };

/**
 * The embedded default: one process, no dependencies. Every operation runs to completion synchronously
 * inside its promise, so concurrent claims are naturally serialised and exactly one of them wins.
 */
export function createMemoryRegistry(options?: MemoryRegistryOptions): MemoryRegistry {
  const { clock, sweepIntervalMs } = resolveMemoryRegistryOptions(options);
  const records = new Map<string, MutableRecord>();
  const nodes = new Map<string, NodeRecord>();
  /** Replica sets by name: owner, account and the holders by node id. */
  const replicaSets = new Map<
    string,
    { owner: string; account: string; holders: Map<string, ReplicaHolder> }
  >();
  // One counter for every name: strictly increasing per name too, and nothing to remember about a name
  // after it is released or expires (a per-name counter would have to outlive its record forever).
  let lastEpoch = 0;
  let nextSweepAt = clock() + sweepIntervalMs;
  let closed = false;

  const sweep = (now: number): void => {
    for (const [name, record] of records) if (record.expiresAt <= now) records.delete(name);
    for (const [id, node] of nodes) if (node.expiresAt <= now) nodes.delete(id);
    for (const name of replicaSets.keys()) liveSet(name, now);
    nextSweepAt = now + sweepIntervalMs;
  };
  // Expired records are invisible at once; they are also removed from memory in bulk, by the timer and,
  // in case timers do not follow the injected clock (tests, or a stalled event loop), on writes once the
  // interval has passed by the clock. Either way memory is bounded by the live names of an interval.
  const sweepIfDue = (now: number): void => {
    if (now >= nextSweepAt) sweep(now);
  };
  const timer = setInterval(() => sweep(clock()), sweepIntervalMs);
  timer.unref();

  const assertOpen = (): void => {
    if (closed) throw new RegistryError(RegistryErrorCode.CLOSED, 'the session registry is closed');
  };
  /** The record of `name` if it has not expired; an expired one is dropped on the way. */
  const live = (name: string, now: number): MutableRecord | undefined => {
    const record = records.get(name);
    if (record === undefined) return undefined;
    if (record.expiresAt <= now) {
      records.delete(name);
      return undefined;
    }
    return record;
  };
  /** The replica set of `name` with its expired holders dropped; undefined (and dropped) when none is live. */
  function liveSet(name: string, now: number) {
    const set = replicaSets.get(name);
    if (set === undefined) return undefined;
    for (const [nodeId, holder] of set.holders) if (holder.expiresAt <= now) set.holders.delete(nodeId);
    if (set.holders.size > 0) return set;
    replicaSets.delete(name);
    return undefined;
  }
  /** Live record holding exactly `epoch`. */
  const current = (name: string, epoch: number, now: number): MutableRecord | undefined => {
    const record = live(name, now);
    return record?.epoch === epoch ? record : undefined;
  };
  /** renew's work: a disconnected record is only a reservation, a late heartbeat must not revive it. */
  const extend = (name: string, epoch: number, ttlMs: number, now: number): boolean => {
    const record = current(name, epoch, now);
    if (record === undefined || !record.connected) return false;
    record.expiresAt = now + ttlMs;
    return true;
  };
  const snapshot = (record: MutableRecord): SessionRecord => ({
    name: record.name,
    nodeId: record.nodeId,
    owner: record.owner,
    epoch: record.epoch,
    expiresAt: record.expiresAt,
    connected: record.connected,
    account: record.account,
  });

  return {
    get size() {
      return records.size;
    },

    async claim(input: ClaimInput): Promise<ClaimResult> {
      assertOpen();
      checkClaimInput(input);
      const now = clock();
      sweepIfDue(now);
      const existing = live(input.name, now);
      if (existing !== undefined && existing.owner !== input.owner) {
        return { ok: false, reason: 'owned-by-other', record: snapshot(existing) };
      }
      const set = liveSet(input.name, now);
      if (set !== undefined && set.owner !== input.owner) {
        // The set has no single record: its first holder stands for it, so the caller can say who holds it.
        const holder = [...set.holders.values()].sort((a, b) => a.nodeId.localeCompare(b.nodeId))[0];
        if (holder !== undefined) {
          const record = {
            name: input.name,
            owner: set.owner,
            account: set.account,
            connected: true,
            ...holder,
          };
          return { ok: false, reason: 'owned-by-other', record };
        }
      }
      lastEpoch += 1;
      const record: MutableRecord = {
        name: input.name,
        nodeId: input.nodeId,
        owner: input.owner,
        epoch: lastEpoch,
        expiresAt: now + input.ttlMs,
        connected: true,
        account: input.account ?? input.owner,
      };
      records.set(input.name, record);
      if (existing === undefined) return { ok: true, record: snapshot(record) };
      return { ok: true, record: snapshot(record), replaced: snapshot(existing) };
    },

    async renew(name, epoch, ttlMs) {
      assertOpen();
      checkName(name);
      checkEpoch(epoch);
      checkTtl('ttlMs', ttlMs);
      return extend(name, epoch, ttlMs, clock());
    },

    async renewMany(leases, ttlMs) {
      assertOpen();
      checkHeldLeases(leases);
      checkTtl('ttlMs', ttlMs);
      const now = clock();
      return leases.map(({ name, epoch }) => extend(name, epoch, ttlMs, now));
    },

    async markDisconnected(name, epoch, graceMs) {
      assertOpen();
      checkName(name);
      checkEpoch(epoch);
      checkGrace(graceMs);
      const now = clock();
      const record = current(name, epoch, now);
      if (record === undefined) return false;
      if (graceMs === 0) {
        records.delete(name);
        return true;
      }
      record.connected = false;
      record.expiresAt = now + graceMs;
      return true;
    },

    async release(name, epoch) {
      assertOpen();
      checkName(name);
      checkEpoch(epoch);
      if (current(name, epoch, clock()) === undefined) return false;
      records.delete(name);
      return true;
    },

    async lookup(name) {
      assertOpen();
      checkName(name);
      const record = live(name, clock());
      return record === undefined ? undefined : snapshot(record);
    },

    async list() {
      assertOpen();
      const now = clock();
      // The scan is a full pass anyway, so it sweeps as it goes.
      sweep(now);
      return [...records.values()].map(snapshot);
    },

    async listOwned(account, space) {
      assertOpen();
      checkOwner(account);
      checkSpace(space);
      const now = clock();
      const prefix = `${space}:`;
      const owned: SessionRecord[] = [];
      for (const [name, record] of records)
        if (record.account === account && name.startsWith(prefix) && record.expiresAt > now)
          owned.push(snapshot(record));
      return owned;
    },

    async announceNode(announcement) {
      assertOpen();
      checkNodeAnnouncement(announcement);
      const now = clock();
      sweepIfDue(now);
      nodes.set(announcement.nodeId, {
        nodeId: announcement.nodeId,
        url: announcement.url,
        expiresAt: now + announcement.ttlMs,
        ...(announcement.signature === undefined ? {} : { signature: announcement.signature }),
      });
    },

    async lookupNode(nodeId) {
      assertOpen();
      checkNodeId(nodeId);
      const node = nodes.get(nodeId);
      if (node === undefined) return undefined;
      if (node.expiresAt <= clock()) {
        nodes.delete(nodeId);
        return undefined;
      }
      return { ...node };
    },

    async withdrawNode(nodeId) {
      assertOpen();
      checkNodeId(nodeId);
      const node = nodes.get(nodeId);
      nodes.delete(nodeId);
      return node !== undefined && node.expiresAt > clock();
    },

    async claimReplica(input: ClaimInput): Promise<ReplicaClaimResult> {
      assertOpen();
      checkClaimInput(input);
      const now = clock();
      sweepIfDue(now);
      const existing = live(input.name, now);
      if (existing !== undefined && existing.owner !== input.owner) {
        return { ok: false, reason: 'owned-by-other', owner: existing.owner };
      }
      let set = liveSet(input.name, now);
      if (set !== undefined && set.owner !== input.owner) {
        return { ok: false, reason: 'owned-by-other', owner: set.owner };
      }
      const account = input.account ?? input.owner;
      if (set === undefined) {
        set = { owner: input.owner, account, holders: new Map() };
        replicaSets.set(input.name, set);
      }
      set.account = account;
      lastEpoch += 1;
      const holder: ReplicaHolder = { nodeId: input.nodeId, epoch: lastEpoch, expiresAt: now + input.ttlMs };
      set.holders.set(input.nodeId, holder);
      return { ok: true, holder: { ...holder } };
    },

    async renewReplica(name, nodeId, epoch, ttlMs) {
      assertOpen();
      checkName(name);
      checkNodeId(nodeId);
      checkEpoch(epoch);
      checkTtl('ttlMs', ttlMs);
      const now = clock();
      const set = liveSet(name, now);
      const holder = set?.holders.get(nodeId);
      if (set === undefined || holder?.epoch !== epoch) return false;
      set.holders.set(nodeId, { ...holder, expiresAt: now + ttlMs });
      return true;
    },

    async releaseReplica(name, nodeId, epoch) {
      assertOpen();
      checkName(name);
      checkNodeId(nodeId);
      checkEpoch(epoch);
      const now = clock();
      const set = liveSet(name, now);
      if (set === undefined || set.holders.get(nodeId)?.epoch !== epoch) return false;
      set.holders.delete(nodeId);
      liveSet(name, now);
      return true;
    },

    async lookupReplicas(name): Promise<ReplicaSet | undefined> {
      assertOpen();
      checkName(name);
      const set = liveSet(name, clock());
      if (set === undefined) return undefined;
      const holders = [...set.holders.values()]
        .map((holder) => ({ ...holder }))
        .sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
      return { name, owner: set.owner, account: set.account, holders };
    },

    async ping() {
      assertOpen();
    },

    async close() {
      closed = true;
      clearInterval(timer);
      records.clear();
      nodes.clear();
      replicaSets.clear();
    },
  };
}
