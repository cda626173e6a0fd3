import type { ScriptedClient } from './redis-client.js';
import { parseNumber, unavailable } from './redis-replies.js';
import { checkClaimInput, checkEpoch, checkName, checkNodeId, checkTtl } from './registry-arguments.js';
import type { ReplicaHolder, ReplicaSetRegistry } from './replica-sets.js';

export interface RedisReplicaSetsContext {
  readonly redis: ScriptedClient;
  readonly clock: () => number;
  /** The name's hash tag: its set lives in the slot of its session hash and epoch counter. */
  tag(name: string): string;
  sessionKey(name: string): string;
  /** How long Redis keeps a key logically live for `ms`. */
  gcTtl(ms: number): string;
  /** Runs a Redis call, closed and client errors turned into RegistryErrors. */
  call<T>(what: string, run: () => Promise<T>): Promise<T>;
}

/** The replica-set half of the Redis registry (scripts in redis-replica-scripts.ts). */
export function redisReplicaSets(context: RedisReplicaSetsContext): ReplicaSetRegistry {
  const { redis, clock, tag, sessionKey, gcTtl, call } = context;
  const setKey = (name: string): string => `${tag(name)}:r:${name}`;
  const acted = (reply: unknown): boolean => {
    if (reply === 0 || reply === 1) return reply === 1;
    throw unavailable('unexpected reply from Redis');
  };
  return {
    async claimReplica(input) {
      checkClaimInput(input);
      return call('claimReplica', async () => {
        const now = clock();
        const reply = await redis.tunnel2ClaimReplica(
          sessionKey(input.name),
          `${tag(input.name)}:epoch`,
          setKey(input.name),
          input.name,
          input.nodeId,
          input.owner,
          String(now + input.ttlMs),
          String(now),
          gcTtl(input.ttlMs),
          input.account ?? input.owner,
        );
        const [outcome, value] = Array.isArray(reply) ? (reply as unknown[]) : [];
        if (outcome === 'claimed') {
          const holder = {
            nodeId: input.nodeId,
            epoch: parseNumber(value, true),
            expiresAt: now + input.ttlMs,
          };
          return { ok: true, holder };
        }
        if (outcome === 'refused' && typeof value === 'string') {
          return { ok: false, reason: 'owned-by-other', owner: value };
        }
        throw unavailable('unexpected reply from Redis');
      });
    },

    async renewReplica(name, nodeId, epoch, ttlMs) {
      checkName(name);
      checkNodeId(nodeId);
      checkEpoch(epoch);
      checkTtl('ttlMs', ttlMs);
      return call('renewReplica', async () => {
        const now = clock();
        return acted(
          await redis.tunnel2RenewReplica(
            setKey(name),
            nodeId,
            String(epoch),
            String(now),
            String(now + ttlMs),
            gcTtl(ttlMs),
          ),
        );
      });
    },

    async releaseReplica(name, nodeId, epoch) {
      checkName(name);
      checkNodeId(nodeId);
      checkEpoch(epoch);
      return call('releaseReplica', async () =>
        acted(await redis.tunnel2ReleaseReplica(setKey(name), nodeId, String(epoch), String(clock()))),
      );
    },

    async lookupReplicas(name) {
      checkName(name);
      return call('lookupReplicas', async () => {
        const fields = await redis.hgetall(setKey(name));
        const now = clock();
        const holders: ReplicaHolder[] = [];
        for (const [field, value] of Object.entries(fields)) {
          if (!field.startsWith('n:')) continue;
          const slash = value.indexOf('/');
          if (slash < 0) throw unavailable('unexpected replica set in Redis');
          const expiresAt = parseNumber(value.slice(slash + 1), false);
          if (expiresAt <= now) continue;
          holders.push({
            nodeId: field.slice(2),
            epoch: parseNumber(value.slice(0, slash), true),
            expiresAt,
          });
        }
        if (holders.length === 0) return undefined;
        const { owner, account } = fields;
        if (owner === undefined || account === undefined)
          throw unavailable('unexpected replica set in Redis');
        holders.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
        return { name, owner, account, holders };
      });
    },
  };
}
