import type { ReplicaSetRegistry, SessionRecord, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';

/** What the claims of replica places need of the session table's options (session-table.ts). */
export interface PlaceClaims {
  registry: SessionRegistry;
  replicaSets: ReplicaSetRegistry;
  nodeId: string;
  leaseTtlMs: number;
  onTakeover?: ((replaced: SessionRecord, claimed: SessionRecord) => void) | undefined;
}

/**
 * Cluster mode: takes this node's place in the replica set of `name` for a replica of `owner`. Another
 * owner's live set or record refuses it (its reserved record, if any, words the refusal). A live
 * exclusive record of the same owner on another node is taken over as on one edge: its node is told.
 */
export async function claimPlace(
  claims: PlaceClaims,
  ask: { name: string; owner: string; account: string },
): Promise<{ ok: true; epoch: number } | { ok: false; record: SessionRecord | undefined }> {
  const { registry, replicaSets, nodeId, leaseTtlMs } = claims;
  const { name, owner } = ask;
  const result = await replicaSets.claimReplica({ ...ask, nodeId, ttlMs: leaseTtlMs });
  const record = await registry.lookup(name);
  if (!result.ok) return { ok: false, record: record?.owner === result.owner ? record : undefined };
  if (record?.owner === owner && record.connected && record.nodeId !== nodeId)
    claims.onTakeover?.(record, { ...record, nodeId, epoch: result.holder.epoch });
  return { ok: true, epoch: result.holder.epoch };
}

/** Cluster mode: an exclusive claim took the owner's replicas' name: their nodes are told (one edge's rule). */
export async function tellReplacedPlaces(claims: PlaceClaims, claimed: SessionRecord): Promise<void> {
  const set = await claims.replicaSets.lookupReplicas(claimed.name);
  if (set === undefined || set.owner !== claimed.owner) return;
  for (const holder of set.holders)
    if (holder.nodeId !== claims.nodeId && holder.epoch < claimed.epoch)
      claims.onTakeover?.({ ...claimed, ...holder, connected: true }, claimed);
}

/**
 * Cluster mode (replica-place.ts is the registry side of this node's places in replica sets: claimed,
 * told, left): this node's places as their last replica here goes. Where the node is the
 * set's last live holder and the agent did not say it was leaving (`graceMs` > 0: its WebSocket dropped, it
 * will reconnect), the place is kept, not renewed, for the reconnect grace: the reservation one edge keeps
 * for a name's last agent, so that no other owner takes the name in a network blip. Beside other live
 * holders the name stays the owner's anyway: the place goes at once, and no node chooses this one. A kept
 * place goes as soon as another node holds the set again (the agents came back there: this node would only
 * draw requests it cannot serve), checked at each lease round.
 */
export class KeptPlaces {
  /** Kept places by name: the epoch each is kept at (bounded by the names served here within a grace). */
  readonly #kept = new Map<string, number>();
  readonly #sets: ReplicaSetRegistry;
  readonly #nodeId: string;
  readonly #logger: Logger;
  /** The registry is failing the checks (logged once until one answers). */
  #failing = false;

  constructor(sets: ReplicaSetRegistry, nodeId: string, logger: Logger) {
    this.#sets = sets;
    this.#nodeId = nodeId;
    this.#logger = logger;
  }

  /** The last replica of `name` here is gone: its place goes, or is kept for `graceMs` (see above). */
  async leave(name: string, epoch: number, graceMs: number): Promise<void> {
    const nodeId = this.#nodeId;
    if (graceMs > 0) {
      const set = await this.#sets.lookupReplicas(name);
      const last = set?.holders.every((holder) => holder.nodeId === nodeId) === true;
      if (last && (await this.#sets.renewReplica(name, nodeId, epoch, graceMs))) {
        this.#kept.set(name, epoch);
        return;
      }
    }
    await this.#sets.releaseReplica(name, nodeId, epoch);
  }

  /** A lease round: a kept place goes once another node holds its set; one expired or claimed anew is forgotten. */
  async round(): Promise<void> {
    for (const [name, epoch] of [...this.#kept]) {
      try {
        const set = await this.#sets.lookupReplicas(name);
        this.#failing = false;
        const mine = set?.holders.find((holder) => holder.nodeId === this.#nodeId);
        if (set !== undefined && mine?.epoch === epoch) {
          if (set.holders.length === 1) continue;
          await this.#sets.releaseReplica(name, this.#nodeId, epoch);
        }
        this.#kept.delete(name);
      } catch (err) {
        // Once per outage: the place simply expires at the end of its grace meanwhile.
        if (!this.#failing) this.#logger.warn({ err, session: name }, 'kept replica place check failed');
        this.#failing = true;
      }
    }
  }
}
