/**
 * Who owns which session name across edge nodes. Each edge keeps its live WebSockets locally; the
 * registry is the shared truth that lets several nodes agree (the memory registry is the embedded
 * default, a Redis implementation plugs in behind this same interface).
 *
 * Every successful claim gets a new epoch, strictly greater than any earlier epoch of that name, even
 * after a release or an expiry. Updates carry the epoch they were granted, so a stale holder (an old
 * connection closing late, a node that lost its lease) can never renew, disconnect or release a newer
 * session: it gets `false` and nothing changes.
 */
export interface SessionRecord {
  readonly name: string;
  /** The edge node holding (or, disconnected, last holding) the connection. */
  readonly nodeId: string;
  /** Opaque owner key (a hash of what identifies the agent), never a secret. */
  readonly owner: string;
  /** Generation of this claim; strictly increasing per name across claims. */
  readonly epoch: number;
  /** When the lease (or, disconnected, the reservation) ends, in ms since the Unix epoch. */
  readonly expiresAt: number;
  /** False while the owner is away and the name is only reserved for its reconnect. */
  readonly connected: boolean;
  /**
   * Whom the latest claim counts against (ClaimInput.account, or the owner when it named none): an edge
   * bounds an account's share of shared things by it (an anonymous agent's is its client address).
   * Absent from a record written by a registry of an older version: read it as the owner then.
   */
  readonly account?: string;
}

/** An edge node as the others reach it (cluster mode): announced by the node, renewed while it runs. */
export interface NodeRecord {
  readonly nodeId: string;
  /** Base URL other nodes forward public requests to, e.g. `http://10.0.0.7:8080`. */
  readonly url: string;
  /** When the announcement ends unless renewed, in ms since the Unix epoch. */
  readonly expiresAt: number;
  /**
   * The announcing node's signature over the record, as it announced it (opaque to the registry; the edge
   * signs with the cluster secret so that whoever can write the registry cannot redirect a node's links).
   */
  readonly signature?: string;
}

export interface NodeAnnouncement {
  nodeId: string;
  url: string;
  /** How long the announcement holds without a renewal. Must be > 0. */
  ttlMs: number;
  /** Stored and returned as is (see NodeRecord.signature); at most 512 characters. */
  signature?: string;
}

export interface ClaimInput {
  name: string;
  nodeId: string;
  owner: string;
  /** Lease length; the holder renews before it ends. Must be > 0. */
  ttlMs: number;
  /**
   * Who the claim counts against, stored in the record: for a name of a key space (`<space>:<key>`), for a
   * limit per owner (`listOwned`); for any name, for what the edge shares out by account (its node links).
   * Default `owner`. The edge counts an anonymous agent by its client address: such an agent picks a new
   * owner key on every connection, so anything counted by owner would not bound it.
   */
  account?: string;
}

/** A lease as its holder knows it: the name and the epoch its claim was granted. */
export interface HeldLease {
  readonly name: string;
  readonly epoch: number;
}

export type ClaimResult =
  | {
      ok: true;
      record: SessionRecord;
      /**
       * The live or reserved record of the same owner this claim took over (absent when the name was free
       * or its lease had run out). In a cluster, its node is told at once that its connection is replaced.
       */
      replaced?: SessionRecord;
    }
  /** The live or reserved record that blocked the claim, so the caller can say who holds the name. */
  | { ok: false; reason: 'owned-by-other'; record: SessionRecord };

/**
 * All methods are async because real implementations talk to a store. Records handed out are snapshots:
 * changing them changes nothing in the registry. Invalid arguments reject with
 * `TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT`; any call after `close()` rejects with
 * `TUNNEL2_ERR_REGISTRY_CLOSED`.
 * A record whose `expiresAt` is not in the future does not exist for any operation.
 */
export interface SessionRegistry {
  /**
   * Takes a name. A free or expired name goes to anyone; a live or reserved name only to its owner, who
   * takes it over with a new epoch (that is how a reconnect replaces the older connection). A live record
   * of another owner refuses the claim and is returned.
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /**
   * Extends the lease of a connected record to `ttlMs` from now; false if the epoch is stale or the
   * record is gone or disconnected (a late heartbeat must not revive a reservation).
   */
  renew(name: string, epoch: number, ttlMs: number): Promise<boolean>;
  /**
   * `renew` for many leases at once (a node renews all of its sessions together), answering in the order
   * asked. Each answer is what `renew` would answer; a store-backed registry sends the whole batch in one
   * round trip instead of one per session. An invalid lease or ttl rejects the whole call, changing nothing.
   */
  renewMany(leases: readonly HeldLease[], ttlMs: number): Promise<boolean[]>;
  /** The holder's connection is gone: keep the name reserved for its owner for `graceMs` (0 frees it now). */
  markDisconnected(name: string, epoch: number, graceMs: number): Promise<boolean>;
  /** Removes the record, only for the current epoch. */
  release(name: string, epoch: number): Promise<boolean>;
  /** The live or reserved record of a name; expired records are invisible. */
  lookup(name: string): Promise<SessionRecord | undefined>;
  /** Every live or reserved record, in no particular order (observability). */
  list(): Promise<SessionRecord[]>;
  /**
   * The live or reserved records in the key space `space` (names `<space>:<key>`: an edge's TCP ports are
   * claimed as `tcp:<port>`, beside the session names, which never contain a colon) whose latest claim
   * counted against `account` (its `account`, or its owner when it named none). For a limit per owner
   * counted across nodes; not atomic with `claim` (count after claiming, release if over).
   */
  listOwned(account: string, space: string): Promise<SessionRecord[]>;
  /**
   * Announces this node and the URL other nodes reach it at, for `ttlMs` (a repeat renews or moves it).
   * A session record names its node by id; this is how another node finds where that is.
   */
  announceNode(announcement: NodeAnnouncement): Promise<void>;
  /** A node's live announcement; undefined if it never announced itself, withdrew, or let it expire. */
  lookupNode(nodeId: string): Promise<NodeRecord | undefined>;
  /** Removes this node's announcement (a clean stop); false if there was none. */
  withdrawNode(nodeId: string): Promise<boolean>;
  /** Resolves if the registry can serve requests (readiness checks); rejects otherwise. */
  ping(): Promise<void>;
  /** Releases the registry's own resources (timers, connections); idempotent. */
  close(): Promise<void>;
}
