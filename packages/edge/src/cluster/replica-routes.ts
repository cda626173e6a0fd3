import type { OwnerEntry } from '../public/cross-node.js';

export interface ReplicaRoutesOptions {
  /** This node's id: its own place in a set is served here, never forwarded. */
  nodeId: string;
  /** How long a name's holders are believed without asking the registry again (the owner cache's TTL). */
  ttlMs: number;
  /** Names remembered at most (the owner cache's size). */
  maxEntries: number;
  /** Asks the registry for a name's holders again (Cluster.find); its answer comes back through `set`. */
  refresh: (name: string) => void;
  now?: () => number;
}

interface Holders {
  /** The holders on other nodes (this node's own place is `here`). */
  readonly remote: readonly OwnerEntry[];
  /** This node holds a place too. */
  readonly here: boolean;
  until: number;
}

/**
 * Where a request for a name served by replicas on several nodes goes: the name's holder nodes as the
 * registry last named them (cached like owners, refreshed in the background so a request never waits for
 * the registry), and the requests this node has outstanding on each holder for that name. The choice is
 * HAProxy's `leastconn` over those counts, ties round robin, this node's own replicas counting as one
 * holder. Only this node's own counts are used: every node balancing its own share over the holders
 * balances the sum, and a slow holder collects outstanding requests in every node's counts alike, without
 * a registry write per request. A holder that did not answer is skipped until its entry is refreshed.
 */
export class ReplicaRoutes {
  readonly #sets = new Map<string, Holders>();
  /** Outstanding requests by name, then by holder node id (entries go at zero). */
  readonly #outstanding = new Map<string, Map<string, number>>();
  /** Nodes that did not answer, until when they are skipped. */
  readonly #down = new Map<string, number>();
  readonly #options: ReplicaRoutesOptions;
  readonly #now: () => number;
  #turn = 0;

  constructor(options: ReplicaRoutesOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** The registry's holders of `name` (every holder, this node's place included). */
  set(name: string, holders: readonly OwnerEntry[]): void {
    const { nodeId, maxEntries, ttlMs } = this.#options;
    this.#sets.delete(name);
    if (maxEntries === 0) return;
    while (this.#sets.size >= maxEntries) {
      const oldest = this.#sets.keys().next().value;
      if (oldest === undefined) break;
      this.#sets.delete(oldest);
    }
    const remote = holders.filter((holder) => holder.nodeId !== nodeId);
    const here = remote.length < holders.length;
    this.#sets.set(name, { remote, here, until: this.#now() + ttlMs });
  }

  /** Whether `name` is known to be served by a replica set (fresh or stale: a stale one is refreshed). */
  known(name: string): boolean {
    return this.#sets.has(name);
  }

  /**
   * The holder the next request for `name` goes to: `here` (this node's replicas, when `hereLive`), another
   * holder, or undefined when none is known and live. `passed`: holders this request already tried
   * (`nodeId#epoch`). A stale entry still answers and is refreshed meanwhile.
   */
  pick(name: string, hereLive: boolean, passed?: ReadonlySet<string>): OwnerEntry | 'here' | undefined {
    const set = this.#sets.get(name);
    const now = this.#now();
    if (set === undefined) {
      this.#options.refresh(name);
      return hereLive ? 'here' : undefined;
    }
    if (set.until <= now) {
      set.until = now + this.#options.ttlMs; // one refresh per period, whatever the request rate
      this.#options.refresh(name);
    }
    const counts = this.#outstanding.get(name);
    const candidates: (OwnerEntry | 'here')[] = [];
    if (hereLive) candidates.push('here');
    for (const holder of set.remote) {
      const down = this.#down.get(holder.nodeId);
      if (down !== undefined && down > now) continue;
      if (passed?.has(`${holder.nodeId}#${holder.epoch}`) !== true) candidates.push(holder);
    }
    const count = candidates.length;
    if (count <= 1) return candidates[0];
    this.#turn = (this.#turn + 1) % 0x40000000;
    let best: OwnerEntry | 'here' | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (let i = 0; i < count; i++) {
      const candidate = candidates[(this.#turn + i) % count] as OwnerEntry | 'here';
      const load = counts?.get(candidate === 'here' ? this.#options.nodeId : candidate.nodeId) ?? 0;
      if (load < bestLoad) {
        best = candidate;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Counts one request this node sent to `nodeId` for `name`; the returned function ends it (once). */
  track(name: string, nodeId: string): () => void {
    let counts = this.#outstanding.get(name);
    if (counts === undefined) {
      counts = new Map();
      this.#outstanding.set(name, counts);
    }
    counts.set(nodeId, (counts.get(nodeId) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const held = this.#outstanding.get(name);
      const left = (held?.get(nodeId) ?? 1) - 1;
      if (held === undefined) return;
      if (left > 0) held.set(nodeId, left);
      else {
        held.delete(nodeId);
        if (held.size === 0) this.#outstanding.delete(name);
      }
    };
  }

  /** Requests outstanding from this node on `nodeId` for `name` (observability, tests). */
  outstanding(name: string, nodeId: string): number {
    return this.#outstanding.get(name)?.get(nodeId) ?? 0;
  }

  /** A holder said it no longer serves `name` (or is not live there): it leaves the set until the next read. */
  drop(name: string, nodeId: string): void {
    const set = this.#sets.get(name);
    if (set === undefined) return;
    const remote = set.remote.filter((holder) => holder.nodeId !== nodeId);
    if (remote.length < set.remote.length) this.#sets.set(name, { ...set, remote });
  }

  /** Forgets a name (no replica set holds it any more). */
  forget(name: string): void {
    this.#sets.delete(name);
  }

  /** A node did not answer: skipped for every name until the holders' next read after the TTL. */
  down(nodeId: string): void {
    this.#down.set(nodeId, this.#now() + this.#options.ttlMs);
    if (this.#down.size > this.#options.maxEntries) {
      const now = this.#now();
      for (const [node, until] of this.#down) if (until <= now) this.#down.delete(node);
    }
  }
}
