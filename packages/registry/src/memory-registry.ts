import { type Clock, systemClock } from './clock.js';
import { RegistryError, RegistryErrorCode } from './errors.js';
import type { ClaimInput, ClaimResult, SessionRecord, SessionRegistry } from './session-registry.js';

export interface MemoryRegistryOptions {
  clock?: Clock;
  /** How often expired records are swept (they are also ignored on access). */
  sweepIntervalMs?: number;
}

/** The embedded default: one process, no dependencies. Expired records are swept so memory stays bounded. */
export function createMemoryRegistry(options: MemoryRegistryOptions = {}): SessionRegistry {
  const clock = options.clock ?? systemClock;
  const records = new Map<string, SessionRecord>();
  // Epochs survive release, so a name claimed again never reuses an old epoch.
  const lastEpoch = new Map<string, number>();
  let epochSeed = 0;
  let closed = false;

  const live = (name: string): SessionRecord | undefined => {
    const record = records.get(name);
    if (record === undefined) return undefined;
    if (record.expiresAt <= clock()) {
      records.delete(name);
      return undefined;
    }
    return record;
  };
  const assertOpen = (): void => {
    if (closed) throw new RegistryError(RegistryErrorCode.CLOSED, 'registry is closed');
  };
  const checkTtl = (what: string, ms: number): void => {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new RegistryError(
        RegistryErrorCode.INVALID_ARGUMENT,
        `${what} must be a non-negative number of ms, got ${ms}`,
      );
    }
  };

  const sweep = setInterval(() => {
    const now = clock();
    for (const [name, record] of records) if (record.expiresAt <= now) records.delete(name);
    // Epoch memory only matters while a record could still be stale somewhere; keep it bounded too.
    if (lastEpoch.size > records.size * 2 + 10_000) {
      for (const name of lastEpoch.keys()) if (!records.has(name)) lastEpoch.delete(name);
    }
  }, options.sweepIntervalMs ?? 30_000);
  sweep.unref();

  const nextEpoch = (name: string): number => {
    // Epochs increase per name and across the registry's life (a wall-clock seed keeps them rising after a restart).
    epochSeed = Math.max(epochSeed + 1, lastEpoch.get(name) ?? 0, clock());
    lastEpoch.set(name, epochSeed);
    return epochSeed;
  };

  return {
    async claim(input: ClaimInput): Promise<ClaimResult> {
      assertOpen();
      checkTtl('ttlMs', input.ttlMs);
      const existing = live(input.name);
      if (existing !== undefined && existing.owner !== input.owner) {
        return { ok: false, reason: 'owned-by-other', record: { ...existing } };
      }
      const record: SessionRecord = {
        name: input.name,
        nodeId: input.nodeId,
        owner: input.owner,
        epoch: nextEpoch(input.name),
        expiresAt: clock() + input.ttlMs,
        connected: true,
      };
      records.set(input.name, record);
      return { ok: true, record: { ...record } };
    },
    async renew(name, epoch, ttlMs) {
      assertOpen();
      checkTtl('ttlMs', ttlMs);
      const record = live(name);
      if (record === undefined || record.epoch !== epoch || !record.connected) return false;
      record.expiresAt = clock() + ttlMs;
      return true;
    },
    async markDisconnected(name, epoch, graceMs) {
      assertOpen();
      checkTtl('graceMs', graceMs);
      const record = live(name);
      if (record === undefined || record.epoch !== epoch) return false;
      if (graceMs === 0) {
        records.delete(name);
        return true;
      }
      record.connected = false;
      record.expiresAt = clock() + graceMs;
      return true;
    },
    async release(name, epoch) {
      assertOpen();
      const record = live(name);
      if (record === undefined || record.epoch !== epoch) return false;
      records.delete(name);
      return true;
    },
    async lookup(name) {
      assertOpen();
      const record = live(name);
      return record === undefined ? undefined : { ...record };
    },
    async list() {
      assertOpen();
      const now = clock();
      return [...records.values()].filter((r) => r.expiresAt > now).map((r) => ({ ...r }));
    },
    async ping() {
      assertOpen();
    },
    async close() {
      closed = true;
      clearInterval(sweep);
      records.clear();
    },
  };
}
