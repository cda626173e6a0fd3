import { ErrorCode } from '@tunnel2/protocol';
import type { ReplicaSetRegistry, SessionRecord, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { pickReplica } from './replica-choice.js';
import { ReplicaCounts } from './replica-counts.js';
import { claimPlace, KeptPlaces, tellReplacedPlaces } from './replica-place.js';
import type { AgentSession, TunnelEntry } from './tunnel-entry.js';

export interface SessionTableOptions {
  registry: SessionRegistry;
  nodeId: string;
  leaseTtlMs: number;
  reconnectGraceMs: number;
  /** Requests that may wait at once for one name's agent to reconnect. */
  maxArrivalWaiters: number;
  logger: Logger;
  /** A claim here took a name over from a live record (cluster mode tells that record's node at once). */
  onTakeover?: ((replaced: SessionRecord, claimed: SessionRecord) => void) | undefined;
  /**
   * Cluster mode: replicas hold the node's place in the name's replica set (one per node, every node's
   * holders side by side) instead of the one exclusive claim they share on a single edge.
   */
  replicaSets?: ReplicaSetRegistry | undefined;
}

type ArrivalWaiter = (connection: TunnelEntry | undefined) => void;

/**
 * Lost leases re-asserted at once after a renewal round (two registry round trips each). One at a time,
 * 20,000 sessions lost to a Redis restarted empty would take ~40 s, longer than a lease; this many in
 * flight bounds the registry's load while a node's sessions come back within a round or two.
 */
export const REASSERT_CONCURRENCY = 64;

export type AdmitResult = { ok: true; epoch: number } | { ok: false; record: SessionRecord | undefined };

/**
 * The sessions connected to this edge node, kept in step with the shared registry: a name is claimed
 * before the WebSocket upgrade, its lease renewed while connected, and marked disconnected (reserved for
 * its owner for a grace period) when the socket goes away. Epochs make sure an older connection that
 * closes late cannot remove a newer one.
 */
export class SessionTable {
  /**
   * Each name's live entries: one, or several when its agents joined as replicas (same owner, all asked
   * to). Replicas share the name's one registry claim (their epochs are equal): the name stays claimed
   * while any of them lives.
   */
  readonly #local = new Map<string, TunnelEntry[]>();
  /** What a replicated name's agents are told of their number (replica-counts.ts). */
  readonly #counts: ReplicaCounts;
  /** Cluster mode: places of names whose last replica here dropped, kept for the grace (replica-place.ts). */
  readonly #kept: KeptPlaces | undefined;
  /** Where the next tie among replicas starts (replica-choice.ts). */
  #turn = 0;
  readonly #options: SessionTableOptions;
  readonly #renewTimer: NodeJS.Timeout;
  /** Requests waiting for a reconnecting agent, by name. */
  readonly #arrivals = new Map<string, Set<ArrivalWaiter>>();
  /** The last renewal could not reach the registry (logged once per outage). */
  #renewFailing = false;
  /** Renewing replica places is failing (logged once until one renews again). */
  #placesFailing = false;
  /** A round still waiting on a slow registry: the next tick is skipped, rounds never pile up. */
  #renewing = false;

  constructor(options: SessionTableOptions) {
    this.#options = options;
    const { replicaSets, nodeId, logger } = options;
    this.#kept = replicaSets && new KeptPlaces(replicaSets, nodeId, logger);
    this.#counts = new ReplicaCounts(nodeId);
    // One timer for every session on this node, not one per session.
    this.#renewTimer = setInterval(
      () => {
        if (this.#renewing) return;
        this.#renewing = true;
        void this.#renewAll().finally(() => {
          this.#renewing = false;
        });
      },
      Math.max(250, Math.floor(options.leaseTtlMs / 3)),
    );
    this.#renewTimer.unref();
  }

  /** Agent sessions (WebSockets) on this node; a session serving several tunnels counts once. */
  get size(): number {
    let count = 0;
    for (const entry of this.tunnels()) if (entry.tag === 0) count++;
    return count;
  }

  /** Names served on this node (each tunnel of a session counts). */
  get names(): number {
    return this.#local.size;
  }

  /**
   * The live, handshaken tunnel for a name on this node; of a name's replicas, the one the next request
   * should go to (replica-choice.ts), other than `avoid` (one that refused it) when another can take it.
   */
  get(name: string, avoid?: TunnelEntry): TunnelEntry | undefined {
    const entries = this.#local.get(name);
    if (entries === undefined || entries.length === 1) return entries?.[0];
    this.#turn = (this.#turn + 1) % 0x40000000;
    return pickReplica(entries, this.#turn, avoid);
  }

  /** Every live entry serving `name` on this node (several when its agents joined as replicas). */
  replicas(name: string): readonly TunnelEntry[] {
    return this.#local.get(name) ?? [];
  }

  /**
   * The epoch a replica of `owner` joins `name` under without a claim of its own, when every live holder
   * of the name here is a replica of that owner still serving; undefined when it must claim as usual (no
   * holder here: the first replica claims; a non-replica holder keeps its exclusive name; a draining one
   * may have given its place up, which another owner may hold now: see draining()).
   */
  joinable(name: string, owner: string): number | undefined {
    const entries = this.#local.get(name);
    if (entries === undefined) return undefined;
    for (const e of entries)
      if (!e.replica || e.owner !== owner || e.leaving || e.session.draining) return undefined;
    return entries[0]?.epoch;
  }

  /** Names served on this node that belong to `owner` (bounded per token, every tunnel of a session counts). */
  countOwnedBy(owner: string): number {
    let count = 0;
    for (const connection of this.tunnels()) if (connection.owner === owner) count++;
    return count;
  }

  /** The agent sessions on this node, each once (a session's own tunnel stands for it). */
  *connections(): IterableIterator<AgentSession> {
    for (const entry of this.tunnels()) if (entry.tag === 0) yield entry.connection;
  }

  /** Every tunnel served on this node (each replica of a name once). */
  *tunnels(): IterableIterator<TunnelEntry> {
    for (const entries of this.#local.values()) yield* entries;
  }

  /** The registry's view of a name (used to tell "never heard of it" from "its agent is away"). */
  lookup(name: string): Promise<SessionRecord | undefined> {
    return this.#options.registry.lookup(name);
  }

  /** Claims `name` for `owner`, counting against `account` (agent-account.ts; the registry records it). */
  async admit(name: string, owner: string, account = owner): Promise<AdmitResult> {
    const result = await this.#options.registry.claim({
      name,
      owner,
      account,
      nodeId: this.#options.nodeId,
      ttlMs: this.#options.leaseTtlMs,
    });
    if (!result.ok) return { ok: false, record: result.record };
    if (result.replaced !== undefined) this.#options.onTakeover?.(result.replaced, result.record);
    const { replicaSets } = this.#options;
    if (replicaSets !== undefined)
      await tellReplacedPlaces({ ...this.#options, replicaSets }, result.record).catch((err: unknown) =>
        this.#options.logger.warn({ err, session: name }, 'registry lookupReplicas failed'),
      );
    return { ok: true, epoch: result.record.epoch };
  }

  /** Cluster mode: this node's place in the replica set of `name` for a replica of `owner` (claimPlace). */
  admitReplica(name: string, owner: string, account = owner): Promise<AdmitResult> {
    const { replicaSets } = this.#options;
    if (replicaSets === undefined) return this.admit(name, owner, account);
    return claimPlace({ ...this.#options, replicaSets }, { name, owner, account });
  }

  /** A replica's agent is leaving: with none left serving here, this node's place goes (nodes stop choosing it). */
  draining(connection: TunnelEntry): void {
    const { replicaSets, nodeId, logger } = this.#options;
    if (connection.replica) this.#counts.tell(connection.name, this.replicas(connection.name));
    if (replicaSets === undefined || !connection.replica) return;
    const entries = this.replicas(connection.name);
    if (entries.length === 0 || !entries.every((entry) => entry.leaving || entry.session.draining)) return;
    replicaSets
      .releaseReplica(connection.name, nodeId, connection.epoch)
      .catch((err: unknown) =>
        logger.warn({ err, session: connection.name }, 'registry releaseReplica failed'),
      );
  }

  /**
   * Another node says its claim numbered `epoch` took `name` over. The local connection closes (as at a
   * lost renewal) only if its epoch is older: epochs only grow, so a newer claim replaced it; a late or
   * replayed notice finds an equal or newer epoch here and closes nothing. True when it closed one.
   */
  supersede(name: string, epoch: number, holder: Pick<SessionRecord, 'nodeId' | 'owner'>): boolean {
    const older = (this.#local.get(name) ?? []).filter((entry) => entry.epoch < epoch);
    for (const connection of older) this.#lose(connection, holder);
    return older.length > 0;
  }

  /** A claimed name whose WebSocket never became a session (`replica`: a place in its replica set). */
  async abandon(name: string, epoch: number, replica = false): Promise<void> {
    const { registry, replicaSets, nodeId } = this.#options;
    if (replica && replicaSets !== undefined) await replicaSets.releaseReplica(name, nodeId, epoch);
    else await registry.release(name, epoch);
  }

  /**
   * The connection finished its handshake: it now serves the name, replacing an older connection; a
   * replica joins the name's other replicas instead (replacing only an older connection of its own run).
   * `joined`: it took no claim of its own (joinable above); if its replicas all left meanwhile, the claim
   * it shared is gone and it is closed to reconnect and claim afresh. False when it was not activated.
   */
  activate(connection: TunnelEntry, joined = false): boolean {
    const previous = this.#local.get(connection.name) ?? [];
    const joins =
      connection.replica && previous.every((entry) => entry.replica && entry.owner === connection.owner);
    if (joined && (!joins || previous.length === 0)) {
      connection.close(ErrorCode.GOING_AWAY, 'the replicas this one joined have all left: reconnect');
      return false;
    }
    const run = joins ? connection.connection.run : undefined;
    const replaced = joins
      ? previous.filter((entry) => run !== undefined && entry.connection.run === run)
      : previous.filter((entry) => entry !== connection);
    const kept = joins ? previous.filter((entry) => !replaced.includes(entry)) : [];
    const entries = [...kept, connection];
    // Replicas hold one claim: a same-owner claim that raced a join moved the epoch, all follow the newest.
    const epoch = Math.max(...entries.map((entry) => entry.epoch));
    for (const entry of entries) entry.epoch = epoch;
    this.#local.set(connection.name, entries);
    // This node's first replica of the name: the other nodes' places are read now, not a round later.
    const { replicaSets, logger } = this.#options;
    if (previous.length === 0 && connection.replica && replicaSets !== undefined)
      this.#counts
        .read(replicaSets, connection.name, () => this.replicas(connection.name))
        .catch((err: unknown) =>
          logger.warn({ err, session: connection.name }, 'registry lookupReplicas failed'),
        );
    for (const older of replaced) {
      this.#options.logger.info({ session: connection.name }, 'newer connection replaces the older one');
      older.close(ErrorCode.SESSION_REPLACED, 'replaced by a newer connection for this name');
    }
    this.#counts.tell(connection.name, this.replicas(connection.name));
    const waiters = this.#arrivals.get(connection.name);
    if (waiters !== undefined) {
      this.#arrivals.delete(connection.name);
      for (const waiter of waiters) waiter(connection);
    }
    return true;
  }

  /**
   * Waits up to `timeoutMs` for `name`'s agent to come back on this node, then calls `done` with its
   * connection (or undefined). Returns a cancel function, or undefined when too many already wait for
   * this name. This path is taken only while an agent is away, so a timer per waiter is affordable; the
   * count per name is bounded.
   */
  awaitArrival(name: string, timeoutMs: number, done: ArrivalWaiter): (() => void) | undefined {
    let waiters = this.#arrivals.get(name);
    if (waiters === undefined) {
      waiters = new Set();
      this.#arrivals.set(name, waiters);
    }
    if (waiters.size >= this.#options.maxArrivalWaiters) return undefined;
    const set = waiters;
    const leave = (): void => {
      clearTimeout(timer);
      set.delete(waiter);
      if (set.size === 0 && this.#arrivals.get(name) === set) this.#arrivals.delete(name);
    };
    const waiter: ArrivalWaiter = (connection) => {
      clearTimeout(timer);
      done(connection);
    };
    const timer = setTimeout(() => {
      leave();
      done(undefined);
    }, timeoutMs);
    timer.unref();
    set.add(waiter);
    return leave;
  }

  /**
   * The connection is gone; its name stays reserved for the owner for the grace period, unless its agent
   * said it was leaving (a graceful close): then the name is free at once, in the registry every node reads.
   */
  async deactivate(connection: TunnelEntry): Promise<void> {
    const entries = this.#local.get(connection.name);
    if (entries !== undefined) {
      const rest = entries.filter((entry) => entry !== connection);
      if (rest.length === 0) {
        this.#local.delete(connection.name);
        this.#counts.forget(connection.name);
      } else if (rest.length < entries.length) this.#local.set(connection.name, rest);
      this.#counts.tell(connection.name, this.replicas(connection.name));
      // Other replicas still hold the claim it shared: the name stays theirs, nothing to tell the registry.
      if (rest.some((entry) => entry.epoch === connection.epoch)) return;
    }
    const graceMs = connection.leaving ? 0 : this.#options.reconnectGraceMs;
    try {
      if (connection.replica && this.#kept !== undefined)
        await this.#kept.leave(connection.name, connection.epoch, graceMs);
      else await this.#options.registry.markDisconnected(connection.name, connection.epoch, graceMs);
    } catch (err) {
      this.#options.logger.warn({ err, session: connection.name }, 'registry release of a name failed');
    }
  }

  close(): void {
    clearInterval(this.#renewTimer);
    const waiters = [...this.#arrivals.values()];
    this.#arrivals.clear();
    for (const set of waiters) for (const waiter of set) waiter(undefined);
  }

  /**
   * Renews every lease of this node in one registry call (one round trip per batch in Redis), so lease
   * upkeep costs at most one round trip per session per lease period however many sessions a node holds.
   * While the registry is down nothing is closed: connected sessions keep serving on this node. A lease
   * the registry no longer knows (it expired during the outage, or Redis restarted empty) is re-asserted.
   */
  async #renewAll(): Promise<void> {
    // One lease per name: replicas share theirs, the first stands for them all.
    const firsts = [...this.#local.values()].map((entries) => entries[0] as TunnelEntry);
    const places = this.#options.replicaSets === undefined ? [] : firsts.filter((entry) => entry.replica);
    const connections = places.length === 0 ? firsts : firsts.filter((entry) => !entry.replica);
    if (places.length > 0) await this.#renewPlaces(places);
    await this.#kept?.round();
    if (connections.length === 0) return;
    let renewed: boolean[];
    try {
      renewed = await this.#options.registry.renewMany(
        connections.map((connection) => ({ name: connection.name, epoch: connection.epoch })),
        this.#options.leaseTtlMs,
      );
    } catch (err) {
      if (!this.#renewFailing) {
        this.#options.logger.warn(
          { err, sessions: connections.length },
          'lease renewal failed: sessions keep serving on this node, re-asserted once the registry is back',
        );
      }
      this.#renewFailing = true;
      return;
    }
    if (this.#renewFailing) {
      this.#renewFailing = false;
      this.#options.logger.info({ sessions: connections.length }, 'session registry reachable again');
    }
    const lost = connections.filter((connection, i) => renewed[i] !== true && this.#holds(connection));
    // The workers share one iterator: each takes the next lost session when its previous one is done.
    const next = lost.values();
    const worker = async (): Promise<void> => {
      for (const connection of next) await this.#reassert(connection);
    };
    await Promise.all(Array.from({ length: Math.min(REASSERT_CONCURRENCY, lost.length) }, worker));
  }

  /**
   * A renewal was refused. If another claim holds the name now (the same token reconnected on another
   * node, or another agent took the name after our lease expired), this connection closes: never two live
   * owners. If the name has no record at all, the lease simply ran out while the registry was away: claim
   * it again for the same owner (a new, higher epoch fences anything older). The claim can still find a
   * record made after the lookup (the agent reconnected elsewhere meanwhile): that newer claim wins, ours
   * is released and this connection closes, as if the lookup had seen it.
   */
  async #reassert(connection: TunnelEntry): Promise<void> {
    const { registry, nodeId, leaseTtlMs, logger } = this.#options;
    const log = { session: connection.name, epoch: connection.epoch };
    try {
      const record = await registry.lookup(connection.name);
      if (!this.#holds(connection)) return;
      if (record === undefined) {
        const claimed = await registry.claim({
          name: connection.name,
          owner: connection.owner,
          account: connection.account,
          nodeId,
          ttlMs: leaseTtlMs,
        });
        if (!this.#holds(connection)) {
          if (claimed.ok) await registry.release(connection.name, claimed.record.epoch);
          return;
        }
        if (claimed.ok && claimed.replaced !== undefined && claimed.replaced.epoch > connection.epoch) {
          // Releasing leaves the name free for a moment; the newer holder's next renewal claims it back.
          await registry.release(connection.name, claimed.record.epoch);
          this.#loseAll(connection.name, claimed.replaced);
          return;
        }
        if (claimed.ok) {
          logger.info({ ...log, newEpoch: claimed.record.epoch }, 'lease re-asserted after it expired');
          for (const entry of this.replicas(connection.name)) entry.epoch = claimed.record.epoch;
          return;
        }
        this.#loseAll(connection.name, claimed.record);
        return;
      }
      if (record.nodeId === nodeId && record.epoch === connection.epoch) return; // renewed meanwhile
      this.#loseAll(connection.name, record);
    } catch (err) {
      // The registry went away again between the renewal and this: the next round tries again.
      this.#renewFailing = true;
      logger.warn({ err, ...log }, 'could not re-assert a lease; trying again next round');
    }
  }

  /**
   * Renews this node's places in replica sets, one call each (the sets are few: one per replicated name).
   * A place the registry no longer has (expired in an outage, Redis restarted empty) is claimed afresh;
   * one another owner took meanwhile closes the replicas here. A name whose replicas here all drain was
   * released (draining above) and is not renewed.
   */
  async #renewPlaces(places: readonly TunnelEntry[]): Promise<void> {
    const { replicaSets, nodeId, leaseTtlMs, logger } = this.#options;
    if (replicaSets === undefined) return;
    await Promise.all(
      places.map(async (first) => {
        const entries = this.replicas(first.name);
        if (entries.every((entry) => entry.leaving || entry.session.draining)) return;
        try {
          const renewed = await replicaSets.renewReplica(first.name, nodeId, first.epoch, leaseTtlMs);
          this.#placesFailing = false;
          if (renewed) {
            await this.#counts.read(replicaSets, first.name, () => this.replicas(first.name));
            return;
          }
          if (!this.#holds(first)) return;
          const claimed = await replicaSets.claimReplica({
            name: first.name,
            owner: first.owner,
            account: first.account,
            nodeId,
            ttlMs: leaseTtlMs,
          });
          if (!this.#holds(first)) {
            if (claimed.ok) await replicaSets.releaseReplica(first.name, nodeId, claimed.holder.epoch);
          } else if (claimed.ok) {
            for (const entry of this.replicas(first.name)) entry.epoch = claimed.holder.epoch;
            logger.info({ session: first.name, epoch: claimed.holder.epoch }, 'replica place re-asserted');
          } else this.#loseAll(first.name, { nodeId: '', owner: claimed.owner });
        } catch (err) {
          // Once per outage, as for leases: the replicas keep serving here meanwhile.
          if (!this.#placesFailing)
            logger.warn(
              { err, session: first.name },
              'replica place renewal failed; trying again each round',
            );
          this.#placesFailing = true;
        }
      }),
    );
  }

  /** The name's first entry, which stands for its replicas in the lease renewal, is still live. */
  #holds(connection: TunnelEntry): boolean {
    return this.#local.get(connection.name)?.[0] === connection;
  }

  #loseAll(name: string, holder: Pick<SessionRecord, 'nodeId' | 'owner'>): void {
    for (const entry of this.replicas(name)) this.#lose(entry, holder);
  }

  #lose(connection: TunnelEntry, holder: Pick<SessionRecord, 'nodeId' | 'owner'>): void {
    const rest = this.replicas(connection.name).filter((entry) => entry !== connection);
    if (rest.length === 0) this.#local.delete(connection.name);
    else this.#local.set(connection.name, rest);
    if (holder.owner === connection.owner) {
      // The same agent reconnected through another node: tell this one it was replaced (the CLI stops
      // rather than reconnecting and taking the name back).
      this.#options.logger.warn(
        { session: connection.name, holder: holder.nodeId },
        'session taken over by the same agent on another node; closing',
      );
      connection.close(ErrorCode.SESSION_REPLACED, 'replaced by a newer connection on another edge node');
      return;
    }
    this.#options.logger.warn(
      { session: connection.name, holder: holder.nodeId },
      'lease lost to another owner; closing',
    );
    connection.close(ErrorCode.GOING_AWAY, 'session taken over elsewhere');
  }
}
