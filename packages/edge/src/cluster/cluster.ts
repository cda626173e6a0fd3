import type { IncomingMessage } from 'node:http';
import { type ProtocolSettings, type WindowBudget, withoutHopByHop } from '@tunnel2/protocol';
import type {
  NodeRecord,
  ReplicaSet,
  ReplicaSetRegistry,
  SessionRecord,
  SessionRegistry,
} from '@tunnel2/registry';
import type { Logger } from 'pino';
import type { ClientOrigin } from '../access/client-address.js';
import {
  NODE_AUTH_HEADER,
  NODE_CLIENT_HEADER,
  NODE_PEER_HEADER,
  type OwnerEntry,
  type OwnerFinding,
} from '../public/cross-node.js';
import { type HopOrigin, type HopRequest, isForwardingField } from '../public/forwarding-headers.js';
import { NodeLinks } from './link/node-link.js';
import { NodeAuth, type SignedFields } from './node-auth.js';
import { NodeHop } from './node-hop.js';
import { OwnerCache } from './owner-cache.js';
import { ReplicaRoutes } from './replica-routes.js';
import { SharedFinds } from './shared-finds.js';
import { NoticeSender, parseTakeoverTarget, type TakeoverNotice, takeoverTarget } from './takeover-notice.js';

/** Cluster mode of an edge: how other nodes reach this one and how node-to-node traffic is authenticated. */
export interface ClusterOptions {
  /**
   * Base URL other nodes forward public requests to (this node's public port as they reach it).
   * Default: the address the edge is bound to (right for nodes on one host or in tests).
   */
  nodeUrl?: string;
  /** Shared by every node; signs node-to-node requests. At least 32 characters; never logged. */
  secret: string;
  /** How long this node's announcement holds without renewal (renewed every third of it). */
  announceTtlMs?: number;
  /** How long a name → node answer is believed without asking the registry again. */
  ownerCacheTtlMs?: number;
  /** Names remembered at most. */
  ownerCacheSize?: number;
  /** A peer node that does not accept a connection in this time is unreachable. */
  connectTimeoutMs?: number;
  /** Pooled connections per peer node (the HTTP hop, used for upgrades and peers without links). */
  connectionsPerNode?: number;
  /**
   * Node-to-node links (one multiplexed WebSocket per peer) for forwarded requests, served and used.
   * Default true; false (or TUNNEL2_NODE_LINK=off) behaves as a node from before links: every forwarded
   * request takes the HTTP hop, and a peer's link upgrade is answered 404 (a rolling upgrade's old node).
   */
  nodeLink?: boolean;
  /**
   * Takes node records that carry no signature (written by nodes from before signed records) during a
   * rolling upgrade: default false (or TUNNEL2_NODE_RECORDS=unsigned-ok). While on, whoever can write the
   * registry can point a node id at an address of theirs again (docs/scaling.md); a record whose signature
   * does not verify is ignored either way.
   */
  unsignedNodeRecords?: boolean;
}

export interface ResolvedClusterOptions {
  nodeUrl: string | undefined;
  secret: string;
  announceTtlMs: number;
  ownerCacheTtlMs: number;
  ownerCacheSize: number;
  connectTimeoutMs: number;
  connectionsPerNode: number;
  nodeLink: boolean;
  unsignedNodeRecords: boolean;
}

export interface ClusterCounters {
  /** Cross-node requests and upgrades by outcome. */
  forwarded: Record<'ok' | 'unreachable' | 'aborted' | 'not_here', number>;
  /** Owner lookups answered by the cache or by the registry. */
  lookups: Record<'hit' | 'miss', number>;
  /** Requests carrying a node signature that did not verify. */
  forged: number;
  /**
   * Node records read from the registry and ignored: unsigned (a node from before signed records) or
   * signed with another secret, for another address, or long expired (written by someone without the secret).
   */
  ignoredRecords: number;
  /**
   * Takeover notices received: `closed` this node's older connection, or `kept` (nothing older here: a
   * late or replayed notice, or the connection was already gone).
   */
  takeovers: Record<'closed' | 'kept', number>;
}

function single(value: string | string[] | undefined): string {
  return typeof value === 'string' ? value : '';
}

/** How soon a failed announcement is tried again (while the registry is unreachable). */
const ANNOUNCE_RETRY_MS = 500;

/**
 * One node of a cluster: announces itself in the registry's node directory, finds which node holds a
 * name (through a short, bounded cache), signs what it forwards and verifies what other nodes forward.
 */
export class Cluster {
  readonly nodeId: string;
  readonly options: ResolvedClusterOptions;
  readonly hop: NodeHop;
  /** Links to peer nodes (undefined when links are off): forwarded requests go over them. */
  readonly links: NodeLinks | undefined;
  readonly counters: ClusterCounters = {
    forwarded: { ok: 0, unreachable: 0, aborted: 0, not_here: 0 },
    lookups: { hit: 0, miss: 0 },
    forged: 0,
    ignoredRecords: 0,
    takeovers: { closed: 0, kept: 0 },
  };
  /** Takeover notices this node sends (see takeover-notice.ts). */
  readonly notices: NoticeSender;
  readonly #registry: SessionRegistry;
  readonly #replicaSets: ReplicaSetRegistry | undefined;
  /** Names served by replicas on several nodes: their holders, and this node's requests on each. */
  readonly replicas: ReplicaRoutes;
  readonly auth: NodeAuth;
  readonly #cache: OwnerCache;
  readonly #finds = new SharedFinds();
  readonly #logger: Logger;
  #timer: NodeJS.Timeout | undefined;
  /** Set while a failed announcement is being retried (the registry was unreachable). */
  #retry: NodeJS.Timeout | undefined;
  #url = '';
  /** Set once an ignored node record was logged at warn: later ones are counted, and logged at debug. */
  #recordWarned = false;
  /** Set once an unsigned record taken under `unsignedNodeRecords` was logged. */
  #unsignedWarned = false;

  constructor(input: {
    registry: SessionRegistry;
    nodeId: string;
    options: ResolvedClusterOptions;
    logger: Logger;
    responseTimeoutMs: number;
    protocol: Partial<ProtocolSettings>;
    maxMessageSize: number;
    windowBudget: WindowBudget;
    replicaSets?: ReplicaSetRegistry | undefined;
  }) {
    this.nodeId = input.nodeId;
    this.options = input.options;
    this.#registry = input.registry;
    this.#replicaSets = input.replicaSets;
    this.replicas = new ReplicaRoutes({
      nodeId: input.nodeId,
      ttlMs: input.options.ownerCacheTtlMs,
      maxEntries: input.options.ownerCacheSize,
      refresh: (name) => void this.find(name).catch(() => undefined),
    });
    this.auth = new NodeAuth(input.options.secret);
    this.#cache = new OwnerCache({
      maxEntries: input.options.ownerCacheSize,
      ttlMs: input.options.ownerCacheTtlMs,
    });
    this.#logger = input.logger.child({ node: input.nodeId });
    this.hop = new NodeHop({
      connectTimeoutMs: input.options.connectTimeoutMs,
      // The peer answers 504 itself at the response timeout; this only catches a peer that went silent.
      headersTimeoutMs: input.responseTimeoutMs + 5_000,
      connectionsPerNode: input.options.connectionsPerNode,
    });
    this.notices = new NoticeSender(input.options.connectTimeoutMs);
    this.links = input.options.nodeLink
      ? new NodeLinks({
          nodeId: input.nodeId,
          auth: this.auth,
          protocol: input.protocol,
          maxMessageSize: input.maxMessageSize,
          windowBudget: input.windowBudget,
          connectTimeoutMs: input.options.connectTimeoutMs,
          // Link bytes are counted with the hop's: one metric of what crosses between nodes.
          counters: this.hop.counters,
          logger: this.#logger,
        })
      : undefined;
  }

  /** Announces this node and keeps the announcement alive (one timer). */
  async start(boundUrl: string): Promise<void> {
    this.#url = this.options.nodeUrl ?? boundUrl;
    await this.#announce();
    this.#timer = setInterval(
      () => this.#renewAnnouncement(),
      Math.max(1, Math.floor(this.options.announceTtlMs / 3)),
    );
    this.#timer.unref();
  }

  /** Announces this node again now rather than at the next round (the registry came back empty). */
  announceNow(): void {
    if (this.#timer !== undefined) this.#renewAnnouncement();
  }

  /**
   * Renews this node's announcement. After a failure (the registry unreachable, or back empty after an
   * outage) it retries every RETRY_MS instead of waiting a whole period: other nodes cannot reach this
   * node's sessions until it is announced again.
   */
  #renewAnnouncement(): void {
    this.#announce().then(
      () => {
        if (this.#retry !== undefined) this.#logger.info('cluster: this node is announced again');
        clearTimeout(this.#retry);
        this.#retry = undefined;
      },
      (err: unknown) => {
        if (this.#timer === undefined) return; // stopped meanwhile
        if (this.#retry === undefined)
          this.#logger.warn({ err }, 'cluster: renewing this node in the registry failed; retrying');
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => this.#renewAnnouncement(), ANNOUNCE_RETRY_MS);
        this.#retry.unref();
      },
    );
  }

  #announce(): Promise<void> {
    const { announceTtlMs: ttlMs } = this.options;
    return this.#registry.announceNode({
      nodeId: this.nodeId,
      url: this.#url,
      ttlMs,
      // Signed afresh at every renewal: a copy of it stops verifying once this announcement would expire.
      signature: this.auth.signNodeRecord(this.nodeId, this.#url, ttlMs),
    });
  }

  /**
   * A node's record, only if the node signed it with the cluster secret: whoever can write the registry
   * but does not hold the secret cannot send this node's links or notices anywhere else. An ignored record
   * is a node not announced (its sessions wait as for a node that is gone).
   */
  async #lookupNode(nodeId: string): Promise<NodeRecord | undefined> {
    const node = await this.#registry.lookupNode(nodeId);
    if (node === undefined || this.auth.verifyNodeRecord(node.nodeId, node.url, node.signature)) return node;
    if (node.signature === undefined && this.options.unsignedNodeRecords) {
      if (!this.#unsignedWarned)
        this.#logger.warn(
          { peer: nodeId, url: node.url },
          'cluster: took an unsigned node record (unsignedNodeRecords is on for a rolling upgrade: turn it off once every node is upgraded)',
        );
      this.#unsignedWarned = true;
      return node;
    }
    this.counters.ignoredRecords++;
    const log = { peer: nodeId, url: node.url, signed: node.signature !== undefined };
    const message =
      'cluster: ignored a node record in the registry whose signature does not verify (unsigned: a node from before signed records; otherwise written without the cluster secret)';
    if (this.#recordWarned) this.#logger.debug(log, message);
    else this.#logger.warn(log, message);
    this.#recordWarned = true;
    return undefined;
  }

  /** The owner cache's entry for `name`, if it has one (no registry read). */
  cachedOwner(name: string): OwnerEntry | undefined {
    const cached = this.#cache.get(name);
    if (cached !== undefined) this.counters.lookups.hit++;
    return cached;
  }

  /**
   * The other node that holds `name` live (of a replica set's holders, the one with the fewest requests
   * outstanding from here), or undefined (not held, held here, disconnected, or its node is not announced).
   * Registry errors propagate: the caller answers "registry unreachable".
   */
  async owner(name: string): Promise<OwnerEntry | undefined> {
    const holder = this.replicas.known(name) ? this.replicas.pick(name, false) : undefined;
    if (holder !== undefined && holder !== 'here') return holder;
    const cached = this.#cache.get(name);
    if (cached !== undefined) {
      this.counters.lookups.hit++;
      return cached;
    }
    const finding = await this.find(name);
    return finding.state === 'remote' ? finding.entry : undefined;
  }

  /**
   * Where `name` stands, asked of the registry itself (not the cache) while a request waits for its agent:
   * `remote` (live on an announced node; the entry is cached), `here` (the record names this node: its
   * agent is reconnecting or this node restarted), `pending` (reserved, or its node is not announced: a
   * record left by a dead node), or `none`. Registry errors propagate. Concurrent askers share one
   * registry read, and its answer for a moment after (shared-finds.ts). Of a replica set's holders, one
   * not in `passed`, by the fewest requests outstanding from here.
   */
  async find(name: string, passed?: ReadonlySet<string>): Promise<OwnerFinding> {
    this.counters.lookups.miss++;
    const finding = await this.#finds.get(name, () => this.#ask(name));
    if (finding.state !== 'remote' || finding.entry.replica !== true) return finding;
    const holder = this.replicas.pick(name, false, passed);
    return holder === undefined || holder === 'here'
      ? { state: 'pending' }
      : { state: 'remote', entry: holder };
  }

  async #ask(name: string): Promise<OwnerFinding> {
    const [record, set] = await Promise.all([
      this.#registry.lookup(name),
      this.#replicaSets?.lookupReplicas(name),
    ]);
    // Both only for one owner's moment of change (exclusive to replicas or back): the newer claim wins.
    const newest = Math.max(0, ...(set?.holders ?? []).map((holder) => holder.epoch));
    if (set !== undefined && !(record?.connected === true && record.epoch > newest))
      return this.#askedReplicas(set);
    this.replicas.forget(name);
    if (record === undefined) return { state: 'none' };
    if (record.nodeId === this.nodeId) return { state: 'here' };
    if (!record.connected) return { state: 'pending' };
    const node = await this.#lookupNode(record.nodeId);
    if (node === undefined) return { state: 'pending' };
    // A record an older node wrote has no account: its owner key stands for it (a rolling upgrade).
    const account = record.account ?? record.owner;
    const entry = { nodeId: node.nodeId, url: node.url, epoch: record.epoch, account };
    this.#cache.set(name, entry);
    return { state: 'remote', entry };
  }

  /**
   * A replica set's holders as routes (replica-routes.ts): `remote` names one of the other holders (the
   * caller picks among them), `here` when this node is the only live holder.
   */
  async #askedReplicas(set: ReplicaSet): Promise<OwnerFinding> {
    const entries = await Promise.all(
      set.holders.map(async ({ nodeId, epoch }) => {
        const node = nodeId === this.nodeId ? { url: this.#url } : await this.#lookupNode(nodeId);
        return node && { nodeId, url: node.url, epoch, account: set.account, replica: true };
      }),
    );
    const live = entries.filter((entry) => entry !== undefined);
    this.replicas.set(set.name, live);
    this.#cache.drop(set.name);
    const remote = live.find((entry) => entry.nodeId !== this.nodeId);
    if (remote !== undefined) return { state: 'remote', entry: remote };
    return live.length > 0 ? { state: 'here' } : { state: 'pending' };
  }

  /** The owner said "not here" (the session moved or ended): forget it, the next request asks again. */
  notHere(name: string, owner: OwnerEntry): void {
    if (owner.replica === true) this.replicas.drop(name, owner.nodeId);
    this.counters.forwarded.not_here++;
    this.#cache.drop(name, owner);
    this.#finds.dropAnswered(name);
  }

  /** The owner could not be reached: forget every name it held and its connections. */
  unreachable(owner: OwnerEntry): void {
    this.gone(owner);
    this.hop.forget(owner.url);
  }

  /**
   * The owner's node id no longer answers at its address, another node does (its link upgrade was answered
   * 421: that node restarted with a new id, say): forget every name it held and its link, counted as
   * unreachable. The connections to the address stay: they reach the node there now.
   */
  gone(owner: OwnerEntry): void {
    this.counters.forwarded.unreachable++;
    this.replicas.down(owner.nodeId);
    this.#cache.dropNode(owner.nodeId);
    this.#finds.dropNode(owner.nodeId);
    this.links?.forget(owner.url, owner.nodeId);
  }

  /**
   * The headers a forwarded request carries to its owner: the client's own minus hop-by-hop and every
   * forwarding field, then what this node decided about the client, signed.
   */
  hopHeaders(req: HopRequest, origin: HopOrigin): string[] {
    const headers = withoutHopByHop(req.rawHeaders);
    const out: string[] = [];
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      // The hop states the client itself (signed); an Expect is answered by the hop's own 100 handling.
      if (!isForwardingField(name) && name.toLowerCase() !== 'expect') out.push(name, headers[i + 1]!);
    }
    const fields: SignedFields = {
      fromNode: this.nodeId,
      method: req.method ?? 'GET',
      target: req.url ?? '/',
      host: req.headers.host ?? '',
      peer: origin.peer,
      client: origin.client,
      forwardedFor: origin.chain ?? '',
      proto: origin.proto,
      forwardedHost: origin.host,
      prefix: origin.prefix,
    };
    if (origin.chain !== undefined) out.push('X-Forwarded-For', origin.chain);
    out.push('X-Forwarded-Proto', origin.proto, 'X-Forwarded-Host', origin.host);
    if (origin.prefix !== '') out.push('X-Forwarded-Prefix', origin.prefix);
    out.push(NODE_PEER_HEADER, origin.peer, NODE_CLIENT_HEADER, origin.client);
    out.push(NODE_AUTH_HEADER, this.auth.sign(fields));
    return out;
  }

  /**
   * A request another node forwarded: the client origin it vouches for, or 'forged' when the signature is
   * missing the mark. Undefined when the request carries no node signature at all.
   */
  verify(req: Pick<IncomingMessage, 'headers' | 'method' | 'url'>): ClientOrigin | 'forged' | undefined {
    const value = req.headers[NODE_AUTH_HEADER];
    if (value === undefined) return undefined;
    const peer = single(req.headers[NODE_PEER_HEADER]);
    const client = single(req.headers[NODE_CLIENT_HEADER]);
    const chain = single(req.headers['x-forwarded-for']);
    const verified =
      typeof value === 'string'
        ? this.auth.verify(value, {
            method: req.method ?? 'GET',
            target: req.url ?? '/',
            host: req.headers.host ?? '',
            peer,
            client,
            forwardedFor: chain,
            proto: single(req.headers['x-forwarded-proto']),
            forwardedHost: single(req.headers['x-forwarded-host']),
            prefix: single(req.headers['x-forwarded-prefix']),
          })
        : undefined;
    if (verified === undefined) {
      this.counters.forged++;
      return 'forged';
    }
    return { peer, trustedPeer: true, address: client, chain: chain === '' ? undefined : chain };
  }

  /**
   * This node's claim took `name` over from a live connection on another node (the same agent reconnected
   * here): tell that node at once, so it stops serving through its connection now rather than at its next
   * renewal round. Fire-and-forget; a failure only leaves the renewal round to close it.
   */
  tellTakeover(replaced: SessionRecord, claimed: SessionRecord): void {
    if (replaced.nodeId === this.nodeId || !replaced.connected) return;
    const log = { session: claimed.name, holder: replaced.nodeId, epoch: claimed.epoch };
    void this.#lookupNode(replaced.nodeId)
      .then((node) => {
        if (node === undefined) return 'failed';
        const url = new URL(
          takeoverTarget({
            toNode: node.nodeId,
            name: claimed.name,
            epoch: claimed.epoch,
            owner: claimed.owner,
          }),
          node.url,
        );
        const signature = this.auth.signNotice(this.nodeId, 'POST', `${url.pathname}${url.search}`);
        return this.notices.send(url, signature);
      })
      .catch(() => 'failed' as const)
      .then((outcome) => {
        if (outcome === 'delivered') this.#logger.debug(log, 'cluster: takeover notice delivered');
        else this.#logger.info({ ...log, outcome }, 'cluster: takeover notice not delivered');
      });
  }

  /**
   * A takeover notice another node sent: what it says when its signature verifies and it is addressed to
   * this node, 'forged' when it carries a signature that does not verify, undefined when it carries none.
   */
  verifyNotice(
    req: IncomingMessage,
  ): (TakeoverNotice & { fromNode: string }) | 'forged' | 'invalid' | undefined {
    const value = req.headers[NODE_AUTH_HEADER];
    if (value === undefined) return undefined;
    const target = req.url ?? '/';
    const verified =
      typeof value === 'string' ? this.auth.verifyNotice(value, req.method ?? 'GET', target) : undefined;
    if (verified === undefined) {
      this.counters.forged++;
      return 'forged';
    }
    const notice = parseTakeoverTarget(target);
    if (notice === undefined || notice.toNode !== this.nodeId) return 'invalid';
    return { ...notice, fromNode: verified.fromNode };
  }

  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#retry);
    this.#retry = undefined;
    this.links?.close();
    await this.hop.close();
    try {
      await this.#registry.withdrawNode(this.nodeId);
    } catch (err) {
      this.#logger.warn({ err }, 'cluster: withdrawing this node from the registry failed');
    }
  }
}
