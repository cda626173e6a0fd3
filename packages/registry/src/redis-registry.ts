import { RegistryError, RegistryErrorCode } from './errors.js';
import { createRegistryClient, type ScriptedPipeline } from './redis-client.js';
import { type RedisRegistryOptions, resolveRedisRegistryOptions } from './redis-options.js';
import { redisReplicaSets } from './redis-replica-sets.js';
import { actedOn, parseNumber, RECORD_FIELDS, toNodeRecord, toRecord, unavailable } from './redis-replies.js';
import { redactRedisUrl } from './redis-url.js';
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
  spaceOf,
} from './registry-arguments.js';
import type { ReplicaSetRegistry } from './replica-sets.js';
import type { ClaimResult, SessionRecord, SessionRegistry } from './session-registry.js';

/*
 * The Redis registry: the same contract as the memory one, shared by every edge node of a cluster. This is
 * reached only through `@tunnel2/registry/redis` (it and redis-client.ts, which it imports, are the only
 * files that load ioredis), so `import '@tunnel2/registry'` (the CLI, a single-node edge) never loads it.
 * It runs on one Redis (`redis://`) or on a Redis Cluster (`redis+cluster://seed,seed`, see redis-url.ts).
 *
 * Keys (all under `keyPrefix`, default `tunnel2:`):
 *   <prefix>{b<n>}:s:<name>   hash {name, nodeId, owner, epoch, expiresAt, connected, account} of a session
 *   <prefix>{b<n>}:r:<name>   hash of the name's replica set (redis-replica-scripts.ts)
 *   <prefix>{b<n>}:epoch      the epoch counter of bucket n (n = FNV-1a(name) mod 1024)
 *   <prefix>{nodes}:node:<id> JSON {url, expiresAt} of an announced edge node
 *   <prefix>{o<n>}:own:<space>:<account>  set of the names `<space>:<key>` claimed counting against this
 *                             account (the owner unless the claim named one; n = FNV-1a(account) mod 1024):
 *                             the index `listOwned` reads, so a per-owner limit costs no scan
 * The `{b<n>}` hash tag puts a name's hash and its bucket's counter in one cluster slot, so each script
 * touches a single slot (Redis Cluster allows nothing else); 1024 buckets spread the names over 1024 slots,
 * hence over every master of a cluster. The node directory shares one tag, `{nodes}`: a handful of small
 * keys read on cache misses, kept in one slot so the directory can be scanned or changed as a whole.
 *
 * Time. Leases follow the injected clock (default Date.now): the caller's `now` and `expiresAt` go into the
 * scripts, which treat `expiresAt <= now` as absent. That keeps the contract suite's fake clock working and
 * makes every node judge a lease the way the memory registry does. Edge nodes' clocks must therefore agree
 * to well within a lease (NTP). Redis's own key expiry is garbage collection only: PEXPIRE of the lease plus
 * `gcMarginMs` (relative, so only Redis's clock rate matters, not its offset), never earlier than the lease.
 *
 * Epochs (the fencing token). A claim's epoch is max(bucket counter + 1, Redis TIME in µs), written back to
 * the counter in the same script. Hence:
 * - Never back, without a key per name: the 1024 counters outlive every record (no TTL) and only move up,
 *   so a name gets a higher epoch after a release or an expiry, and memory stays bounded for unbounded names.
 * - Equality fencing: renew, markDisconnected and release act only when the stored epoch equals the caller's,
 *   and the record is live (and, for renew, connected). A stale holder never matches a newer claim.
 * - Failover. Replication is asynchronous: a promoted replica can miss the last claims and their counter
 *   increments. Without the time floor it would hand out an epoch a lost claim already had, and that lost
 *   claim's holder could then act on the new session. With it, epochs track Redis's clock in µs (a bucket
 *   would need over 1,000 claims per ms to run ahead of it), and a failover takes seconds, so the new master's
 *   epochs exceed every lost one, provided the Redis servers' clocks agree to within the failover time.
 *   Epochs stay below 2^53 until the year 2255. The lost holder still believes it holds a lease; its next
 *   renew answers false and the edge closes it. (WAIT after a claim would narrow the window; not done here.)
 * - On a Redis Cluster, TIME is that of the master holding the name's slot, and the counter lives in that
 *   slot too. That is enough: epochs are only ever compared for one name, so only the clocks of one shard
 *   (its master and the replica promoted in its place) must agree, to within that shard's failover time;
 *   shards' clocks may differ from each other by any amount. A slot migrated to another shard carries its
 *   counter key along (MIGRATE moves the key), so the counter never goes back there either.
 *
 * Unavailability. ioredis is set up so a Redis that is down fails calls promptly rather than queueing them:
 * no offline queue, no per-request retries, a command timeout; it reconnects on its own in the background,
 * so the same registry works again once Redis is back. Every client error becomes a RegistryError
 * `TUNNEL2_ERR_REGISTRY_UNAVAILABLE` carrying the client error as `cause`. A write whose answer was lost
 * (timeout) may or may not have happened: a claim may then hold a new epoch its caller never learnt; the
 * owner's next claim takes it over, or it expires with its lease.
 *
 * The owner index is written after a claim of a name in a key space (a second command: on a cluster the set
 * lives in another slot than the record) and pruned by `listOwned`, which reads every member's record and
 * drops those no longer live or no longer counted against that account. Every key but the 1,024 epoch
 * counters expires (issue #29: an index without one outlived every record of a throwaway owner, for good:
 * +2.4 MB of used_memory and 10,000 keys per 10,000 such owners, measured). The record stores its account, and each script that extends a record answers it, so the
 * registry extends the index as far (never shortening it: INDEX_SCRIPT); a release or a grace of 0 takes the
 * name out of the index at once. A renewal round thus costs one more command per distinct account renewed,
 * in the same pipelined way.
 *
 * `list()` SCANs the prefix on every master (bounded COUNT per step, no KEYS) and reads the hashes in
 * pipelined batches: its work is proportional to the keyspace, it is for observability.
 *
 * Round trips. `renewMany` sends one pipeline per batch of `batchSize` leases; on a cluster each batch is split
 * by the master serving each name's slot and those pipelines run in parallel, so every lease still costs one
 * command in one round trip per lease period (a node renewing N sessions makes ceil(N / batchSize) rounds,
 * each of at most one pipeline per master).
 */

/** Part of the key layout: every node of a deployment must use the same value (change the prefix to change it). */
export const EPOCH_BUCKETS = 1_024;
/** Reconnect backoff cap: Redis coming back is noticed within this long. */
const MAX_RECONNECT_DELAY_MS = 1_000;

export {
  DEFAULT_BATCH_SIZE,
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_GC_MARGIN_MS,
  DEFAULT_KEY_PREFIX,
  type RedisRegistryOptions,
} from './redis-options.js';

/** FNV-1a over the UTF-16 code units: the same bucket on every node, whatever the platform. */
export function epochBucket(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % EPOCH_BUCKETS;
}

/** Async: it connects first, so a wrong URL or an absent Redis fails at startup with UNAVAILABLE. */
export async function createRedisRegistry(
  options: RedisRegistryOptions,
): Promise<SessionRegistry & ReplicaSetRegistry> {
  const resolved = resolveRedisRegistryOptions(options);
  const { keyPrefix, clock, gcMarginMs, batchSize } = resolved;
  const client = createRegistryClient(resolved.address, {
    commandTimeoutMs: resolved.commandTimeoutMs,
    connectTimeoutMs: resolved.connectTimeoutMs,
    maxReconnectDelayMs: MAX_RECONNECT_DELAY_MS,
  });
  const { redis } = client;
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw unavailable(`cannot connect to Redis at ${redactRedisUrl(resolved.url)}`, err);
  }

  let closed = false;
  const tag = (name: string): string => `${keyPrefix}{b${epochBucket(name)}}`;
  const sessionKey = (name: string): string => `${tag(name)}:s:${name}`;
  const nodeKey = (nodeId: string): string => `${keyPrefix}{nodes}:node:${nodeId}`;
  const ownedKey = (account: string, space: string): string =>
    `${keyPrefix}{o${epochBucket(account)}}:own:${space}:${account}`;
  /** The owner index that lists `name` under `account`; undefined for a plain name (or none stored). */
  const indexOf = (name: string, account: string): string | undefined => {
    const space = spaceOf(name);
    return space === undefined || account === '' ? undefined : ownedKey(account, space);
  };
  /** How long Redis keeps a key that is logically live for `ms`: never less, at most a safe integer. */
  const gcTtl = (ms: number): string => String(Math.min(Math.ceil(ms) + gcMarginMs, 2 ** 50));

  /** Runs a Redis call, turning every client error into UNAVAILABLE. */
  const call = async <T>(what: string, run: () => Promise<T>): Promise<T> => {
    if (closed) throw new RegistryError(RegistryErrorCode.CLOSED, 'the session registry is closed');
    try {
      return await run();
    } catch (err) {
      if (RegistryError.isRegistryError(err)) throw err;
      throw unavailable(`Redis ${what} failed`, err);
    }
  };

  /**
   * Keeps owner indexes alive `gcTtlMs` from now, each with the names renewed (pipelined, grouped by master
   * on a cluster). The names are added again (SADD is idempotent): an index that expired before its records
   * (a renewal round whose index step failed) is written anew, not left missing while its records live on.
   */
  const extendIndexes = async (indexes: ReadonlyMap<string, string[]>, gcTtlMs: string): Promise<void> => {
    const keys = [...indexes.keys()];
    for (let start = 0; start < keys.length; start += batchSize) {
      await Promise.all(
        client
          .pipelineGroups(keys.slice(start, start + batchSize), (key) => key)
          .map(async (group) => {
            const pipeline = redis.pipeline() as ScriptedPipeline;
            for (const key of group) pipeline.tunnel2Index(key, gcTtlMs, ...(indexes.get(key) ?? []));
            for (const [err] of (await pipeline.exec()) ?? []) if (err !== null) throw err;
          }),
      );
    }
  };

  const renewArgs = (epoch: number, ttlMs: number, now: number): string[] => [
    String(epoch),
    String(now),
    String(now + ttlMs),
    gcTtl(ttlMs),
  ];

  return {
    ...redisReplicaSets({ redis, clock, tag, sessionKey, gcTtl, call }),

    async claim(input): Promise<ClaimResult> {
      checkClaimInput(input);
      return call('claim', async () => {
        const now = clock();
        const account = input.account ?? input.owner;
        const index = indexOf(input.name, account);
        const reply = await redis.tunnel2Claim(
          sessionKey(input.name),
          `${tag(input.name)}:epoch`,
          `${tag(input.name)}:r:${input.name}`,
          input.name,
          input.nodeId,
          input.owner,
          String(now + input.ttlMs),
          String(now),
          gcTtl(input.ttlMs),
          account,
        );
        if (!Array.isArray(reply)) throw unavailable('unexpected reply from Redis');
        const [outcome, ...rest] = reply as unknown[];
        if (outcome === 'claimed') {
          if (index !== undefined) await redis.tunnel2Index(index, gcTtl(input.ttlMs), input.name);
          const record: SessionRecord = {
            name: input.name,
            nodeId: input.nodeId,
            owner: input.owner,
            epoch: parseNumber(rest[0], true),
            expiresAt: now + input.ttlMs,
            connected: true,
            account,
          };
          if (rest.length === 1) return { ok: true, record };
          const replaced = toRecord([input.name, ...rest.slice(1)], Number.NEGATIVE_INFINITY);
          if (replaced === undefined) throw unavailable('unexpected reply from Redis');
          return { ok: true, record, replaced };
        }
        const record = toRecord([input.name, ...rest], Number.NEGATIVE_INFINITY);
        if (outcome !== 'refused' || record === undefined) throw unavailable('unexpected reply from Redis');
        return { ok: false, reason: 'owned-by-other', record };
      });
    },

    async renew(name, epoch, ttlMs) {
      checkName(name);
      checkEpoch(epoch);
      checkTtl('ttlMs', ttlMs);
      return call('renew', async () => {
        const acted = actedOn(
          await redis.tunnel2Renew(sessionKey(name), ...renewArgs(epoch, ttlMs, clock())),
        );
        const index = acted === undefined ? undefined : indexOf(name, acted.account);
        if (index !== undefined) await redis.tunnel2Index(index, gcTtl(ttlMs), name);
        return acted !== undefined;
      });
    },

    async renewMany(leases, ttlMs) {
      checkHeldLeases(leases);
      checkTtl('ttlMs', ttlMs);
      return call('renewMany', async () => {
        const answers: boolean[] = [];
        // The owner indexes of the renewed names, kept alive as long as them once every batch is done.
        const indexes = new Map<string, string[]>();
        // One pipeline per batch (per master of the batch's names on a cluster, those in parallel): one
        // round trip for `batchSize` leases, and a bounded amount in flight.
        for (let start = 0; start < leases.length; start += batchSize) {
          const now = clock();
          const batch = leases.slice(start, start + batchSize).map((lease, i) => ({ lease, i }));
          const replies = await Promise.all(
            client
              .pipelineGroups(batch, ({ lease }) => sessionKey(lease.name))
              .map(async (group) => {
                const pipeline = redis.pipeline() as ScriptedPipeline;
                for (const { lease } of group) {
                  pipeline.tunnel2Renew(sessionKey(lease.name), ...renewArgs(lease.epoch, ttlMs, now));
                }
                const results = await pipeline.exec();
                if (results === null) throw unavailable('Redis pipeline was discarded');
                return group.map(({ i }, k) => ({ i, result: results[k] }));
              }),
          );
          const ordered = new Array<boolean>(batch.length);
          for (const { i, result } of replies.flat()) {
            if (result === undefined) throw unavailable('unexpected reply from Redis');
            const [err, reply] = result;
            if (err !== null) throw err;
            const acted = actedOn(reply);
            ordered[i] = acted !== undefined;
            const name = batch[i]!.lease.name;
            const index = acted === undefined ? undefined : indexOf(name, acted.account);
            if (index !== undefined) {
              const names = indexes.get(index);
              if (names === undefined) indexes.set(index, [name]);
              else names.push(name);
            }
          }
          answers.push(...ordered);
        }
        await extendIndexes(indexes, gcTtl(ttlMs));
        return answers;
      });
    },

    async markDisconnected(name, epoch, graceMs) {
      checkName(name);
      checkEpoch(epoch);
      checkGrace(graceMs);
      return call('markDisconnected', async () => {
        const now = clock();
        const acted = actedOn(
          await redis.tunnel2Disconnect(
            sessionKey(name),
            String(epoch),
            String(now),
            graceMs === 0 ? '' : String(now + graceMs),
            gcTtl(graceMs),
          ),
        );
        const index = acted === undefined ? undefined : indexOf(name, acted.account);
        if (index !== undefined) {
          // The reservation keeps counting against its account until it ends; a freed name stops at once.
          if (graceMs === 0) await redis.srem(index, name);
          else await redis.tunnel2Index(index, gcTtl(graceMs), name);
        }
        return acted !== undefined;
      });
    },

    async release(name, epoch) {
      checkName(name);
      checkEpoch(epoch);
      return call('release', async () => {
        const acted = actedOn(await redis.tunnel2Release(sessionKey(name), String(epoch), String(clock())));
        const index = acted === undefined ? undefined : indexOf(name, acted.account);
        if (index !== undefined) await redis.srem(index, name);
        return acted !== undefined;
      });
    },

    async lookup(name) {
      checkName(name);
      return call('lookup', async () => {
        const values = await redis.hmget(sessionKey(name), ...RECORD_FIELDS);
        return toRecord(values, clock());
      });
    },

    async list() {
      return call('list', async () => {
        const pattern = `${globEscape(keyPrefix)}{b*}:s:*`;
        const seen = new Set<string>();
        const records: SessionRecord[] = [];
        // Every master holds its own share of the keys. SCAN may return a key twice (also across masters while
        // a slot migrates) and bounds each step's work by COUNT; reads go through the routing client, in
        // pipelines grouped by node, so a key that moved meanwhile is still read where it now lives.
        for (const primary of client.primaries()) {
          let cursor = '0';
          do {
            const [next, keys] = await primary.scan(cursor, 'MATCH', pattern, 'COUNT', batchSize);
            cursor = next;
            const fresh = keys.filter((key) => !seen.has(key));
            for (const key of fresh) seen.add(key);
            for (const group of client.pipelineGroups(fresh, (key) => key)) {
              const pipeline = redis.pipeline();
              for (const key of group) pipeline.hmget(key, ...RECORD_FIELDS);
              const replies = (await pipeline.exec()) ?? [];
              const now = clock();
              for (const [err, values] of replies) {
                if (err !== null) throw err;
                const record = toRecord(values, now);
                if (record !== undefined) records.push(record);
              }
            }
          } while (cursor !== '0');
        }
        return records;
      });
    },

    async listOwned(account, space) {
      checkOwner(account);
      checkSpace(space);
      return call('listOwned', async () => {
        const key = ownedKey(account, space);
        const names = await redis.smembers(key);
        const owned: SessionRecord[] = [];
        const stale: string[] = [];
        for (const group of client.pipelineGroups(names, sessionKey)) {
          const pipeline = redis.pipeline();
          for (const name of group) pipeline.hmget(sessionKey(name), ...RECORD_FIELDS);
          const replies = (await pipeline.exec()) ?? [];
          const now = clock();
          replies.forEach(([err, values], i) => {
            if (err !== null) throw err;
            const record = toRecord(values, now);
            // A record written before records stored their account counts against its owner.
            if (record !== undefined && (record.account ?? record.owner) === account) owned.push(record);
            else stale.push(group[i]!);
          });
        }
        if (stale.length > 0) await redis.srem(key, ...stale);
        return owned;
      });
    },

    async announceNode(announcement) {
      checkNodeAnnouncement(announcement);
      return call('announceNode', async () => {
        const expiresAt = clock() + announcement.ttlMs;
        const { url, signature } = announcement;
        const value = JSON.stringify({ url, expiresAt, ...(signature === undefined ? {} : { signature }) });
        await redis.set(nodeKey(announcement.nodeId), value, 'PX', gcTtl(announcement.ttlMs));
      });
    },

    async lookupNode(nodeId) {
      checkNodeId(nodeId);
      return call('lookupNode', async () => toNodeRecord(nodeId, await redis.get(nodeKey(nodeId)), clock()));
    },

    async withdrawNode(nodeId) {
      checkNodeId(nodeId);
      return call('withdrawNode', async () => {
        // GETDEL: removed and read in one step, so "was it live" answers for what was actually removed.
        const value = await redis.getdel(nodeKey(nodeId));
        return toNodeRecord(nodeId, value, clock()) !== undefined;
      });
    },

    async ping() {
      // On a cluster every master must answer: a name on a silent master could be neither claimed nor found.
      await call('ping', () => client.pingAll());
    },

    async close() {
      if (closed) return;
      closed = true;
      client.disconnect();
    },
  };
}

/** SCAN's MATCH is a glob: the prefix must match literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}
