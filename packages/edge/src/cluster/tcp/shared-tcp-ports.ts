import type { Server, Socket } from 'node:net';
import { ErrorCode, type MuxStream, type TcpHead } from '@tunnel2/protocol';
import type { ReplicaSetRegistry, SessionRecord, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { agentAccount } from '../../agents/agent-account.js';
import type { TcpClaim } from '../../agents/port-claims.js';
import type { TcpPort } from '../../agents/tcp-port.js';
import type { TunnelEntry } from '../../agents/tunnel-entry.js';
import { EdgeErrorCode } from '../../errors.js';
import type { InFlight } from '../../exchange/in-flight.js';
import { acceptTcpConnection, type TcpCounters } from '../../tcp/tcp-connection.js';
import type { TcpPortRange } from '../../tcp/tcp-port-range.js';
import { type TcpPortTable, tooMany } from '../../tcp/tcp-tunnels.js';
import type { Cluster } from '../cluster.js';
import type { LinkTcpArrival } from '../link/link-request.js';
import {
  candidatePorts,
  HeldPort,
  makeRoom,
  portKey,
  type Room,
  renewPortLeases,
  TCP_SPACE,
} from './port-leases.js';
import { listenPort } from './port-listener.js';
import { ReplicaPorts } from './replica-ports.js';
import { arriveCarried } from './tcp-arrival.js';
import { MAX_HELD_TCP_CONNECTIONS, TcpHolds } from './tcp-hold.js';

export interface SharedTcpPortsOptions {
  range: TcpPortRange;
  host: string;
  maxPortsPerOwner: number;
  reconnectGraceMs: number;
  leaseTtlMs: number;
  registry: SessionRegistry;
  /** The registry's replica sets: a port served by TCP replicas on several nodes (replica-ports.ts). */
  replicaSets?: ReplicaSetRegistry | undefined;
  cluster: Cluster;
  inFlight: InFlight;
  /** How long a connection waits for its port's agent to be served again (tcp-hold.ts). */
  reconnectWaitMs: number;
  /** Connections one port may hold waiting for its agent at once. */
  maxHeldPerPort: number;
  /** Connections this node may hold waiting at once, every port together. */
  maxHeldPerNode?: number;
  /** SO_REUSEPORT: each worker of `--workers N` binds the range itself, the kernel spreads connections. */
  reusePort?: boolean;
  logger: Logger;
}

/**
 * A cluster node's public TCP ports. Every node listens on the whole range; a port is claimed in the registry
 * as `tcp:<port>` (owner, node, epoch: a name's lease, grace and fencing); an owner's ports are counted across
 * nodes. A connection to a port held here goes to the agent; one held by another node is carried there
 * (tcp-carry.ts) and spliced by the holder (`arrive`); one held nowhere is reset. A port of TCP replicas is a
 * replica set of holder nodes instead (replica-ports.ts): a connection goes to a local replica or is carried
 * to another holder, by the fewest connections open from this node on each (`#spread`).
 */
export class SharedTcpPorts implements TcpPortTable, LinkTcpArrival {
  readonly counters: TcpCounters = {
    connections: { accepted: 0, forbidden: 0, no_agent: 0, refused: 0, forwarded: 0 },
    bytes: { in: 0, out: 0 },
    open: 0,
    held: 0,
  };
  readonly #options: SharedTcpPortsOptions;
  readonly #holds: TcpHolds;
  readonly #replicas: ReplicaPorts | undefined;
  readonly #listeners = new Map<number, Server>();
  readonly #held = new Map<number, HeldPort>();
  /** Connections carried to other nodes, reset when this node closes. */
  readonly #carried = new Set<Socket>();
  #renewTimer: NodeJS.Timeout | undefined;
  #renewing = false;
  #closed = false;

  constructor(options: SharedTcpPortsOptions) {
    this.#options = options;
    this.#holds = new TcpHolds({
      cluster: options.cluster,
      counters: this.counters,
      inFlight: options.inFlight,
      carried: this.#carried,
      reconnectWaitMs: options.reconnectWaitMs,
      maxPerPort: options.maxHeldPerPort,
      maxPerNode: options.maxHeldPerNode ?? MAX_HELD_TCP_CONNECTIONS,
      servedHere: (port) => this.#servedHere(port),
      logger: options.logger,
    });
    const { replicaSets, cluster } = options;
    this.#replicas =
      replicaSets === undefined
        ? undefined
        : new ReplicaPorts({
            registry: options.registry,
            replicaSets,
            nodeId: cluster.nodeId,
            leaseTtlMs: options.leaseTtlMs,
            logger: options.logger,
            onTakeover: (replaced, claimed) => cluster.tellTakeover(replaced, claimed),
          });
  }

  get size(): number {
    return this.#held.size;
  }

  /** Listens on every port of the range (one descriptor each); a port the host refuses is left out. */
  async start(): Promise<void> {
    const { first, last } = this.#options.range;
    const refused: number[] = [];
    const listening: Promise<void>[] = [];
    for (let port = first; port <= last; port++) {
      listening.push(
        this.#listen(port).then((ok) => {
          if (!ok) refused.push(port);
        }),
      );
    }
    await Promise.all(listening);
    if (refused.length > 0)
      this.#options.logger.warn(
        { ports: refused.length, first: Math.min(...refused) },
        'TCP: some ports of the range are taken on this host; they are not served by this node',
      );
    this.#renewTimer = setInterval(
      () => {
        if (this.#renewing) return;
        this.#renewing = true;
        void this.#renewAll().finally(() => {
          this.#renewing = false;
        });
      },
      Math.max(250, Math.floor(this.#options.leaseTtlMs / 3)),
    );
    this.#renewTimer.unref();
  }

  async claim(
    owner: string,
    requested: number | undefined,
    address?: string,
    replica = false,
  ): Promise<TcpClaim> {
    if (this.#closed) return refuse(EdgeErrorCode.DRAINING, 'this edge is shutting down');
    const { first, last } = this.#options.range;
    const { registry, maxPortsPerOwner } = this.#options;
    if (requested !== undefined && (requested < first || requested > last)) {
      return refuse(
        EdgeErrorCode.TCP_PORT_UNAVAILABLE,
        `port ${requested} is outside this edge's TCP range ${first}-${last}`,
      );
    }
    const refused = tooMany(maxPortsPerOwner, address, 'across the cluster');
    const account = agentAccount(owner, address);
    if (replica && requested !== undefined) return this.#claimReplica(owner, requested, account, refused);
    try {
      const owned = await registry.listOwned(account, TCP_SPACE);
      // Its own port again (a reconnect, here or on another node): not one more port.
      const again =
        requested !== undefined &&
        owned.some((record) => record.name === portKey(requested) && record.owner === owner);
      if (requested !== undefined && !again) {
        // Another owner's port (its record or its replicas' set) is refused before anything is given back for it.
        const holder =
          (await registry.lookup(portKey(requested)))?.owner ?? (await this.#replicas?.owner(requested));
        if (holder !== undefined && holder !== owner)
          return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${requested} is in use by another agent`);
      }
      // Its replica ports here count too: the registry lists exclusive records by account, not replica places.
      const replicaPorts = [...this.#held.values()].filter((h) => h.replica && h.account === account).length;
      if (!again && !(await makeRoom(owned, requested, this.#roomFor(replicaPorts)))) return refused;
      // An owner's own ports are not candidates for another: claiming one would take it over from itself.
      const own = new Set(owned.map((record) => record.name));
      for (const candidate of candidatePorts(this.#options.range, this.#held, requested)) {
        if (requested === undefined && own.has(portKey(candidate))) continue;
        if (this.#closed) return refuse(EdgeErrorCode.DRAINING, 'this edge is shutting down');
        if (!this.#listeners.has(candidate)) {
          if (requested !== undefined)
            return refuse(
              EdgeErrorCode.TCP_PORT_UNAVAILABLE,
              `port ${requested} is taken on this edge's host`,
            );
          continue;
        }
        const result = await registry.claim({
          name: portKey(candidate),
          owner,
          account,
          nodeId: this.#options.cluster.nodeId,
          ttlMs: this.#options.leaseTtlMs,
        });
        if (!result.ok) {
          if (requested !== undefined)
            return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${requested} is in use by another agent`);
          continue;
        }
        // Counted after claiming (the registry cannot count and claim in one step across nodes): two
        // claims racing past the limit on two nodes both see it, and both give their port back.
        if (
          !again &&
          (await registry.listOwned(account, TCP_SPACE)).length + replicaPorts > maxPortsPerOwner
        ) {
          await registry.release(portKey(candidate), result.record.epoch);
          return refused;
        }
        // The same owner's live claim on another node (its agent came back elsewhere): that node stops
        // serving the port now rather than at its next renewal round.
        if (result.replaced !== undefined) this.#options.cluster.tellTakeover(result.replaced, result.record);
        // The owner's replicas' places on other nodes, if any: this exclusive claim takes the port from them.
        void this.#replicas
          ?.tellReplaced(result.record)
          .catch((err: unknown) =>
            this.#options.logger.warn({ err, port: candidate }, 'TCP: takeover notice failed'),
          );
        return { ok: true, port: this.#hold(candidate, owner, result.record.epoch, account) };
      }
    } catch (err) {
      this.#options.logger.error({ err }, 'TCP: registry claim failed');
      return refuse(
        EdgeErrorCode.REGISTRY_UNAVAILABLE,
        'the session registry is unavailable: new TCP ports cannot be claimed right now, retry shortly',
      );
    }
    return refuse(EdgeErrorCode.TCP_PORTS_EXHAUSTED, `every TCP port of ${first}-${last} is in use`);
  }

  abandon(port: TcpPort): void {
    const held = this.#current(port);
    if (held === undefined || held.connection !== undefined) return;
    if (held.replica) {
      this.#leaveReplica(held, !held.attached);
      return;
    }
    if (held.attached) {
      held.servedEpoch = held.epoch;
      this.#startGrace(held);
      return;
    }
    this.#forget(held);
    void this.#options.registry
      .release(portKey(held.port), held.epoch)
      .catch((err: unknown) => this.#options.logger.warn({ err, port: held.port }, 'TCP: release failed'));
  }

  attach(port: TcpPort, connection: TunnelEntry): void {
    const held = this.#current(port);
    if (held === undefined) {
      connection.close(ErrorCode.INTERNAL_ERROR, 'the TCP port was released before the session was ready');
      return;
    }
    if (held.graceTimer !== undefined) clearTimeout(held.graceTimer);
    held.graceTimer = undefined;
    held.attached = true;
    held.servedEpoch = held.epoch;
    // A replica joins its owner's other replicas here, as on one node (TcpPort.take).
    const replaced = held.take(connection);
    for (const older of replaced)
      older.close(ErrorCode.SESSION_REPLACED, 'another agent with the same token took over this TCP port');
    // The agent came back to this node: connections held for it go to it now.
    this.#holds.wake(held.port);
  }

  detach(port: TcpPort, connection: TunnelEntry): void {
    const held = this.#current(port);
    if (held === undefined) return;
    if (!held.leave(connection)) {
      this.abandon(held);
      return;
    }
    // Its other replicas here keep serving the port; their connections go on.
    if (held.connection !== undefined) held.tellReplicas();
    else if (held.replica) this.#leaveReplica(held, connection.leaving);
    // A newer claim of its owner (a newer epoch, not yet attached) keeps the port through a graceful close.
    else this.#startGrace(held, connection.leaving && held.epoch === held.servedEpoch);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#renewTimer);
    for (const server of this.#listeners.values()) server.close();
    this.#listeners.clear();
    this.#holds.close();
    for (const held of [...this.#held.values()]) this.#forget(held);
    for (const socket of this.#carried) socket.resetAndDestroy();
  }

  /**
   * Another node's claim numbered `epoch` took `port` over (a takeover notice): the session serving it here
   * stops if its claim is older. True when it closed one.
   */
  supersede(port: number, epoch: number, holder: Pick<SessionRecord, 'owner' | 'nodeId'>): boolean {
    const held = this.#held.get(port);
    if (held === undefined || held.epoch >= epoch) return false;
    this.#lose(held, holder);
    return true;
  }

  accountOf(port: number): string | undefined {
    return this.#held.get(port)?.account;
  }

  /** A connection another node carried here: spliced to the agent holding the port, or refused. */
  arrive(link: MuxStream, head: TcpHead, started: (link: MuxStream) => void): void {
    arriveCarried(this.#held.get(head.port), link, head, {
      counters: this.counters,
      logger: this.#options.logger,
      started,
    });
  }

  #hold(number: number, owner: string, epoch: number, account: string, replica = false): HeldPort {
    const existing = this.#held.get(number);
    if (existing !== undefined && existing.owner === owner) {
      // Its owner again: the grace runs on until that session is ready (attach), as on one node.
      existing.epoch = epoch;
      existing.replica = replica;
      return existing;
    }
    // Another owner's entry here is stale: the registry just gave the port away, so it was lost.
    if (existing !== undefined) this.#lose(existing, { owner, nodeId: this.#options.cluster.nodeId });
    const server = this.#listeners.get(number)!;
    const held = new HeldPort(number, owner, server, epoch, account);
    held.replica = replica;
    this.#held.set(number, held);
    return held;
  }

  /** A TCP replica's claim of `port`: its place in the port's replica set (replica-ports.ts). */
  #claimReplica(owner: string, port: number, account: string, refused: TcpClaim): Promise<TcpClaim> {
    const here = {
      held: this.#held,
      listening: this.#listeners.has(port),
      closed: () => this.#closed,
      maxPortsPerOwner: this.#options.maxPortsPerOwner,
      hold: (epoch: number) => this.#hold(port, owner, epoch, account, true),
    };
    const noSets = refuse(
      EdgeErrorCode.BAD_REQUEST,
      'this registry keeps no replica sets: run one agent per port',
    );
    return this.#replicas?.claimPort({ owner, port, account, refused }, here) ?? Promise.resolve(noSets);
  }

  /**
   * The last replica of the port here is gone (or its claim never got a session): this node stops serving
   * it now, and its place in the set goes, or is kept for the grace when it is the set's last holder and the
   * agent did not say it was leaving (KeptPlaces). Connections arriving meanwhile wait for a replica
   * anywhere (tcp-hold.ts), and go to one coming back here (wake).
   */
  #leaveReplica(held: HeldPort, leaving: boolean): void {
    this.#forget(held);
    const graceMs = leaving || this.#closed ? 0 : this.#options.reconnectGraceMs;
    void this.#replicas
      ?.leave(held, graceMs)
      .catch((err: unknown) =>
        this.#options.logger.warn({ err, port: held.port }, 'TCP: replica place release failed'),
      );
  }

  /**
   * A connection to a port served by replicas here and maybe on other nodes: to the holder with the fewest
   * connections this node has open on it (this node's own replicas count as one holder; replica-routes.ts,
   * as for a name's requests), a holder that did not answer skipped; carried when another node is chosen.
   */
  #spread(held: HeldPort, socket: Socket): void {
    const key = portKey(held.port);
    const { cluster } = this.#options;
    const choice = cluster.replicas.pick(key, true);
    if (choice !== undefined && choice !== 'here') {
      this.#holds.route(held.port, socket, choice);
      return;
    }
    socket.once('close', cluster.replicas.track(key, cluster.nodeId));
    acceptTcpConnection(held, socket, this.counters, this.#options.logger, this.#options.inFlight);
  }

  #roomFor(replicaPorts: number): Room {
    const { registry, logger, maxPortsPerOwner } = this.#options;
    const givenBack = (port: number, epoch: number): void => {
      const held = this.#held.get(port);
      if (held !== undefined && held.epoch === epoch && held.connection === undefined) this.#forget(held);
    };
    return { registry, logger, maxPortsPerOwner: maxPortsPerOwner - replicaPorts, givenBack };
  }

  #current(port: TcpPort): HeldPort | undefined {
    const held = this.#held.get(port.port);
    return held === port ? held : undefined;
  }

  /**
   * The session ended: the registry keeps the port its owner's for the grace, and so does this node; an
   * agent that said it was leaving (a graceful close) frees it at once.
   */
  #startGrace(held: HeldPort, leaving = false): void {
    const { registry, logger } = this.#options;
    const reconnectGraceMs = leaving ? 0 : this.#options.reconnectGraceMs;
    void registry
      .markDisconnected(portKey(held.port), held.servedEpoch, reconnectGraceMs)
      .catch((err: unknown) => logger.warn({ err, port: held.port }, 'TCP: markDisconnected failed'));
    if (reconnectGraceMs === 0 || this.#closed) {
      this.#forget(held);
      return;
    }
    if (held.graceTimer !== undefined) return;
    held.graceTimer = setTimeout(() => this.#forget(held), reconnectGraceMs);
    held.graceTimer.unref();
  }

  #forget(held: HeldPort): void {
    if (held.graceTimer !== undefined) clearTimeout(held.graceTimer);
    held.graceTimer = undefined;
    if (this.#held.get(held.port) === held) this.#held.delete(held.port);
    for (const socket of held.sockets) socket.resetAndDestroy();
  }

  /** The port is another claim's now (the same token on another node, or another owner after expiry). */
  #lose(held: HeldPort, holder: Pick<SessionRecord, 'owner' | 'nodeId'>): void {
    this.#forget(held);
    const entries = held.entries;
    held.connection = undefined;
    this.#options.logger.warn({ port: held.port, holder: holder.nodeId }, 'TCP: port taken over elsewhere');
    for (const connection of entries)
      if (holder.owner === held.owner)
        connection.close(ErrorCode.SESSION_REPLACED, 'replaced by a newer connection on another edge node');
      else connection.close(ErrorCode.GOING_AWAY, 'TCP port taken over elsewhere');
  }

  /** Renews the leases of the ports served here (port-leases.ts); a registry that is away is retried next round. */
  async #renewAll(): Promise<void> {
    const all = [...this.#held.values()].filter(
      (h) => h.connection !== undefined && h.graceTimer === undefined,
    );
    const served = all.filter((held) => !held.replica);
    const { registry, logger, leaseTtlMs } = this.#options;
    try {
      await this.#replicas?.renew(
        all.filter((held) => held.replica),
        {
          current: (held) => this.#held.get(held.port) === held,
          lose: (held, holder) => this.#lose(held, holder),
        },
      );
      if (served.length === 0) return;
      const reasserted = await renewPortLeases(served, {
        registry,
        logger,
        leaseTtlMs,
        nodeId: this.#options.cluster.nodeId,
        current: (held) => this.#held.get(held.port) === held,
        lose: (held, holder) => this.#lose(held, holder),
      });
      if (reasserted) this.#options.cluster.announceNow();
    } catch (err) {
      logger.warn({ err }, 'TCP: port lease renewal failed; ports keep serving, retried next round');
    }
  }

  async #listen(number: number): Promise<boolean> {
    const { host, reusePort, logger } = this.#options;
    const server = await listenPort(number, {
      host,
      reusePort: reusePort === true,
      logger,
      onConnection: (socket) => this.#onConnection(number, socket),
    });
    if (server === undefined) return false;
    if (this.#closed) {
      server.close();
      return false;
    }
    this.#listeners.set(number, server);
    return true;
  }

  #onConnection(number: number, socket: Socket): void {
    const held = this.#servedHere(number);
    if (held?.replica === true) {
      this.#spread(held, socket);
      return;
    }
    if (held !== undefined) {
      acceptTcpConnection(held, socket, this.counters, this.#options.logger, this.#options.inFlight);
      return;
    }
    this.#holds.route(number, socket);
  }

  /** The port as held here when its session can take a connection now: ready, and not handing over. */
  #servedHere(number: number): HeldPort | undefined {
    const held = this.#held.get(number);
    return held?.entries.some((entry) => entry.ready && !entry.session.draining) === true ? held : undefined;
  }
}

function refuse(code: EdgeErrorCode, message: string): TcpClaim {
  return { ok: false, code, message };
}
