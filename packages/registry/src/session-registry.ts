/**
 * Who owns which session name across edge nodes. The edge keeps live WebSockets locally; the registry is
 * the shared truth that lets several nodes agree (a Redis implementation plugs in behind this interface).
 *
 * Every successful claim gets a new epoch, strictly greater than any earlier epoch of that name. Updates
 * carry the epoch they were granted, so a stale owner (an old connection closing late, a node that lost
 * its lease) can never renew, disconnect or release a newer session.
 */
export interface SessionRecord {
  name: string;
  /** The edge node holding the live connection. */
  nodeId: string;
  /** Opaque owner key (a hash of the agent's token or key), never a secret. */
  owner: string;
  epoch: number;
  /** When the lease (or, disconnected, the reservation) ends, in ms since the epoch. */
  expiresAt: number;
  /** False while the owner is away and the name is only reserved for its reconnect. */
  connected: boolean;
}

export interface ClaimInput {
  name: string;
  nodeId: string;
  owner: string;
  ttlMs: number;
}

export type ClaimResult =
  | { ok: true; record: SessionRecord }
  | { ok: false; reason: 'owned-by-other'; record: SessionRecord };

export interface SessionRegistry {
  /** Takes a name: free or expired names go to anyone, a live or reserved name only to its owner (new epoch). */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /** Extends the lease of the current epoch; false if the epoch is stale or the record is gone. */
  renew(name: string, epoch: number, ttlMs: number): Promise<boolean>;
  /** The owner's connection is gone: keep the name reserved for it for `graceMs`. */
  markDisconnected(name: string, epoch: number, graceMs: number): Promise<boolean>;
  /** Removes the record, only for the current epoch. */
  release(name: string, epoch: number): Promise<boolean>;
  /** The live or reserved record of a name; expired records are invisible. */
  lookup(name: string): Promise<SessionRecord | undefined>;
  /** Every live or reserved record (observability). */
  list(): Promise<SessionRecord[]>;
  /** Resolves if the registry is reachable (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
