/**
 * Replica sets: several edge nodes holding one name at once, each for its own agents (replicas) of the
 * same owner. A node claims a place in the set for its replicas of the name, renews it with its heartbeat
 * and releases it when its last replica there is gone; a node without a replica of the name reads the set
 * to choose where to forward. One holder per node: the node balances over its own replicas of the name.
 *
 * Ownership is shared with the exclusive records of SessionRegistry: a live exclusive record of another
 * owner refuses a replica claim, and a live replica set (one live holder is enough) of another owner
 * refuses an exclusive claim, so different owners can never serve one name. Each holder's claim gets an
 * epoch from the same strictly increasing sequence as exclusive claims; renew and release act only on the
 * holder's current epoch, so a node's late heartbeat cannot revive or remove its newer place.
 */
import type { ClaimInput } from './session-registry.js';

export interface ReplicaHolder {
  readonly nodeId: string;
  readonly epoch: number;
  /** When this holder's lease ends unless renewed, in ms since the Unix epoch. */
  readonly expiresAt: number;
}

export interface ReplicaSet {
  readonly name: string;
  readonly owner: string;
  /** Whom the set counts against (the latest claim's account, or the owner). */
  readonly account: string;
  /** The live holders, at least one, ordered by node id. */
  readonly holders: readonly ReplicaHolder[];
}

export type ReplicaClaimResult =
  | { ok: true; holder: ReplicaHolder }
  /** The owner of the live record or set that blocked the claim. */
  | { ok: false; reason: 'owned-by-other'; owner: string };

/** Implemented by every registry beside SessionRegistry (memory, Redis, a worker's IPC registry). */
export interface ReplicaSetRegistry {
  /**
   * Takes (or, for a node already holding one, takes anew with a new epoch) the place of `input.nodeId` in
   * the replica set of `input.name`. Refused while a live exclusive record or a live set of another owner
   * holds the name. An exclusive record of the same owner is left as it is.
   */
  claimReplica(input: ClaimInput): Promise<ReplicaClaimResult>;
  /** Extends a holder's lease to `ttlMs` from now; false for a stale epoch or an expired or released place. */
  renewReplica(name: string, nodeId: string, epoch: number, ttlMs: number): Promise<boolean>;
  /** Removes a holder, only at its current epoch; the set goes with its last holder. */
  releaseReplica(name: string, nodeId: string, epoch: number): Promise<boolean>;
  /** The live set of a name; undefined when no holder is live. */
  lookupReplicas(name: string): Promise<ReplicaSet | undefined>;
}
