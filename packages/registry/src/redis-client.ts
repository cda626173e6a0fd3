import calculateSlot from 'cluster-key-slot';
import { type ChainableCommander, Cluster, Redis, type RedisOptions } from 'ioredis';
import {
  CLAIM_REPLICA_SCRIPT,
  RELEASE_REPLICA_SCRIPT,
  RENEW_REPLICA_SCRIPT,
} from './redis-replica-scripts.js';
import {
  CLAIM_SCRIPT,
  INDEX_SCRIPT,
  MARK_DISCONNECTED_SCRIPT,
  RELEASE_SCRIPT,
  RENEW_SCRIPT,
} from './redis-scripts.js';
import type { RedisAddress } from './redis-url.js';

/*
 * The Redis connection of the registry: one client for a standalone Redis, an ioredis Cluster for a Redis
 * Cluster. The registry speaks to either through this one shape; what differs is here:
 * - Routing: a Cluster sends each command (and each script, by its first key) to the master of its slot and
 *   follows MOVED/ASK redirections during resharding by itself.
 * - Pipelines: an ioredis Cluster pipeline may only hold keys of slots served by one set of nodes, so
 *   `pipelineGroups` splits a batch by the nodes serving each key's slot (one group per master: the renewals
 *   of a node still travel in one round trip per node, all nodes in parallel).
 * - Scans: SCAN sees one server's keys, so `primaries()` names every master to scan.
 */

/** The scripts as ioredis commands (EVALSHA, falling back to EVAL on a fresh connection). */
export interface ScriptCommands {
  tunnel2Claim(session: string, counter: string, replicas: string, ...argv: string[]): Promise<unknown>;
  tunnel2ClaimReplica(
    session: string,
    counter: string,
    replicas: string,
    ...argv: string[]
  ): Promise<unknown>;
  tunnel2RenewReplica(replicas: string, ...argv: string[]): Promise<unknown>;
  tunnel2ReleaseReplica(replicas: string, ...argv: string[]): Promise<unknown>;
  tunnel2Renew(session: string, ...argv: string[]): Promise<unknown>;
  tunnel2Disconnect(session: string, ...argv: string[]): Promise<unknown>;
  tunnel2Release(session: string, ...argv: string[]): Promise<unknown>;
  tunnel2Index(index: string, ...argv: string[]): Promise<unknown>;
}
export type ScriptedClient = (Redis | Cluster) & ScriptCommands;
export type ScriptedPipeline = ChainableCommander & {
  tunnel2Renew(session: string, ...argv: string[]): ChainableCommander;
  tunnel2Index(index: string, ...argv: string[]): ChainableCommander;
};

export interface RegistryClient {
  /** Commands by key: the one connection, or the cluster routing each to its slot's master. */
  readonly redis: ScriptedClient;
  /** Splits items into groups a single pipeline may carry (all of them at once on a standalone Redis). */
  pipelineGroups<T>(items: readonly T[], keyOf: (item: T) => string): T[][];
  /** The connections to SCAN: the one server, or every master of the cluster. */
  primaries(): Redis[];
  /** PINGs the server, or every master the slot map names (one that has gone from the pool fails it). */
  pingAll(): Promise<void>;
  connect(): Promise<void>;
  disconnect(): void;
}

export interface ClientTimings {
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  maxReconnectDelayMs: number;
}

export function createRegistryClient(address: RedisAddress, timings: ClientTimings): RegistryClient {
  const common: RedisOptions = {
    username: address.username,
    password: address.password,
    ...(address.tls ? { tls: {} } : {}),
    // Fail fast instead of waiting for Redis to come back: callers (the edge) decide what to do.
    maxRetriesPerRequest: 0,
    commandTimeout: timings.commandTimeoutMs,
    connectTimeout: timings.connectTimeoutMs,
  };
  // Keep reconnecting in the background, backing off to a cap: the registry recovers by itself.
  const retryStrategy = (attempt: number): number => Math.min(attempt * 50, timings.maxReconnectDelayMs);
  let redis: ScriptedClient;
  if (address.cluster) {
    redis = new Cluster(address.seeds, {
      lazyConnect: true,
      enableOfflineQueue: false,
      clusterRetryStrategy: retryStrategy,
      scaleReads: 'master',
      redisOptions: common,
    }) as Cluster & ScriptCommands;
  } else {
    const [seed] = address.seeds;
    redis = new Redis({
      ...common,
      host: seed?.host,
      port: seed?.port,
      db: address.db,
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy,
    }) as Redis & ScriptCommands;
  }
  // Connection errors surface on calls as UNAVAILABLE; without a listener ioredis would print them.
  redis.on('error', () => {});
  redis.defineCommand('tunnel2Claim', { numberOfKeys: 3, lua: CLAIM_SCRIPT });
  redis.defineCommand('tunnel2ClaimReplica', { numberOfKeys: 3, lua: CLAIM_REPLICA_SCRIPT });
  redis.defineCommand('tunnel2RenewReplica', { numberOfKeys: 1, lua: RENEW_REPLICA_SCRIPT });
  redis.defineCommand('tunnel2ReleaseReplica', { numberOfKeys: 1, lua: RELEASE_REPLICA_SCRIPT });
  redis.defineCommand('tunnel2Renew', { numberOfKeys: 1, lua: RENEW_SCRIPT });
  redis.defineCommand('tunnel2Disconnect', { numberOfKeys: 1, lua: MARK_DISCONNECTED_SCRIPT });
  redis.defineCommand('tunnel2Release', { numberOfKeys: 1, lua: RELEASE_SCRIPT });
  redis.defineCommand('tunnel2Index', { numberOfKeys: 1, lua: INDEX_SCRIPT });

  const pipelineGroups = <T>(items: readonly T[], keyOf: (item: T) => string): T[][] => {
    if (!(redis instanceof Cluster)) return items.length === 0 ? [] : [[...items]];
    const groups = new Map<string, T[]>();
    for (const item of items) {
      const slot = calculateSlot(keyOf(item));
      // The nodes serving the slot, as ioredis groups a pipeline; a slot not known yet goes alone (ioredis
      // then routes that pipeline itself).
      const owner = redis.slots[slot]?.join(',') ?? `slot:${slot}`;
      const group = groups.get(owner);
      if (group === undefined) groups.set(owner, [item]);
      else group.push(item);
    }
    return [...groups.values()];
  };

  const pingAll = async (): Promise<void> => {
    if (!(redis instanceof Cluster)) {
      await redis.ping();
      return;
    }
    // ioredis drops a master whose connection ended from nodes('master'), but the slot map still names it
    // until a replica is promoted: readiness must follow the slot map, or a dead master would go unseen.
    const named = new Set(redis.slots.map((nodes) => nodes[0]).filter((key) => key !== undefined));
    const byKey = new Map(
      redis.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]),
    );
    if (named.size === 0) throw new Error('no Redis Cluster slot map yet');
    await Promise.all(
      [...named].map((key) => {
        const node = byKey.get(key);
        if (node === undefined) throw new Error(`Redis Cluster master ${key} is not connected`);
        return node.ping();
      }),
    );
  };

  return {
    redis,
    pingAll,
    pipelineGroups,
    primaries: () => (redis instanceof Cluster ? redis.nodes('master') : [redis]),
    connect: () => redis.connect(),
    disconnect: () => redis.disconnect(),
  };
}
