import { createServer, type Server, type Socket } from 'node:net';
import { ErrorCode, encodeTcpHead, encodeTunnelTag, type MuxStream, type TcpHead } from '@tunnel2/protocol';
import type { SessionRecord, SessionRegistry } from '@tunnel2/registry';
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
import { StreamSplice } from '../link/stream-splice.js';
import { HeldPort, portKey, renewPortLeases, TCP_SPACE } from './port-leases.js';
import { TCP_ACCEPTED } from './tcp-carry.js';
import { MAX_HELD_TCP_CONNECTIONS, TcpHolds } from './tcp-hold.js';

export interface SharedTcpPortsOptions {
  range: TcpPortRange;
  host: string;
  maxPortsPerOwner: number;
  reconnectGraceMs: number;
  leaseTtlMs: number;
  registry: SessionRegistry;
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
 * A cluster node's public TCP ports. Every node listens on the whole range; a port is claimed in the shared
 * registry as `tcp:<port>` (owner, node, epoch: the same lease, grace and epoch fencing as a name), and an
 * owner's ports (an anonymous agent's: its address's) are counted across nodes, those in grace included. A connection to a port held here goes to the agent; one held
 * by another node is carried there over the node link (tcp-carry.ts) and spliced to the agent's stream by
 * the holder (`arrive`); one held nowhere is reset at once.
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

  async claim(owner: string, requested: number | undefined, address?: string): Promise<TcpClaim> {
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
    try {
      const owned = await registry.listOwned(account, TCP_SPACE);
      // Its own port again (a reconnect, here or on another node): not one more port.
      const again =
        requested !== undefined &&
        owned.some((record) => record.name === portKey(requested) && record.owner === owner);
      if (requested !== undefined && !again) {
        // Another owner's port is refused before anything of this account is given back for it.
        const holder = await registry.lookup(portKey(requested));
        if (holder !== undefined && holder.owner !== owner)
          return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${requested} is in use by another agent`);
      }
      if (!again && !(await this.#makeRoom(owned, requested))) return refused;
      // An owner's own ports are not candidates for another: claiming one would take it over from itself.
      const own = new Set(owned.map((record) => record.name));
      for (const candidate of this.#candidates(requested)) {
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
        if (!again && (await registry.listOwned(account, TCP_SPACE)).length > maxPortsPerOwner) {
          await registry.release(portKey(candidate), result.record.epoch);
          return refused;
        }
        // The same owner's live claim on another node (its agent came back elsewhere): that node stops
        // serving the port now rather than at its next renewal round.
        if (result.replaced !== undefined) this.#options.cluster.tellTakeover(result.replaced, result.record);
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
    const previous = held.connection;
    held.connection = connection;
    if (previous !== undefined && previous !== connection)
      previous.close(ErrorCode.SESSION_REPLACED, 'another agent with the same token took over this TCP port');
    // The agent came back to this node: connections held for it go to it now.
    this.#holds.wake(held.port);
  }

  detach(port: TcpPort, connection: TunnelEntry): void {
    const held = this.#current(port);
    if (held === undefined) return;
    if (held.connection !== connection) {
      this.abandon(held);
      return;
    }
    held.connection = undefined;
    // A newer claim of its owner (a newer epoch, not yet attached) keeps the port through a graceful close.
    this.#startGrace(held, connection.leaving && held.epoch === held.servedEpoch);
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
    const { counters } = this;
    const connection = this.#held.get(head.port)?.connection;
    if (connection === undefined || !connection.ready || connection.session.draining) {
      // "Not here": the ingress passes this node over and holds the connection until a newer claim.
      counters.connections.no_agent++;
      link.reset(ErrorCode.REFUSED_STREAM);
      return;
    }
    if (
      connection.protection !== undefined &&
      !connection.protection.check(undefined, head.clientAddress).ok
    ) {
      counters.connections.forbidden++;
      link.reset(ErrorCode.CANCEL);
      return;
    }
    let agent: MuxStream | undefined;
    try {
      agent = connection.slots.tryOpen();
      const tcpHead = encodeTcpHead(head);
      agent?.sendHeaders(connection.tag === 0 ? tcpHead : encodeTunnelTag(connection.tag, tcpHead), false);
    } catch (err) {
      this.#options.logger.debug({ err, port: head.port }, 'TCP: carried connection refused: no stream');
      agent?.reset(ErrorCode.CANCEL);
      agent = undefined;
    }
    if (agent === undefined) {
      counters.connections.refused++;
      link.reset(ErrorCode.CANCEL);
      return;
    }
    counters.connections.accepted++;
    started(link);
    // "Taken here": until this empty head, the ingress reads nothing from its client, so a refusal before
    // it (the port moved, its cached owner was stale) loses no byte and the ingress may ask again.
    link.sendHeaders(TCP_ACCEPTED, false);
    new StreamSplice(link, agent);
  }

  /**
   * Room for one more port of the account whose ports are `owned`: true at once below the limit; at it, its
   * oldest ports in their grace (reservations, on any node) are given back, as on one node (tcp-tunnels.ts);
   * false when all of them are in use. A node still keeping a given-back port in its grace serves nothing on
   * it (no session) and forgets it when that grace ends; the registry, not it, says who holds the port.
   * The port asked for is never given back for its own claim: it is another owner's reservation (the same
   * address, another agent key), which that claim must not take, as on one node.
   */
  async #makeRoom(owned: readonly SessionRecord[], requested: number | undefined): Promise<boolean> {
    const excess = owned.length - this.#options.maxPortsPerOwner + 1;
    if (excess <= 0) return true;
    const inGrace = owned
      .filter(
        (record) => !record.connected && (requested === undefined || record.name !== portKey(requested)),
      )
      .sort((a, b) => a.expiresAt - b.expiresAt);
    if (inGrace.length < excess) return false;
    for (const record of inGrace.slice(0, excess)) {
      const port = Number(record.name.slice(TCP_SPACE.length + 1));
      this.#options.logger.info({ port }, 'TCP: oldest port in its grace given back for a new claim');
      await this.#options.registry.release(record.name, record.epoch);
      const held = this.#held.get(port);
      if (held !== undefined && held.epoch === record.epoch && held.connection === undefined)
        this.#forget(held);
    }
    return true;
  }

  /** The requested port, or every port of the range from a random start (a freed port is not reused first). */
  *#candidates(requested: number | undefined): Generator<number> {
    if (requested !== undefined) {
      yield requested;
      return;
    }
    const { first, last } = this.#options.range;
    const size = last - first + 1;
    const start = Math.floor(Math.random() * size);
    for (let i = 0; i < size; i++) {
      const candidate = first + ((start + i) % size);
      if (!this.#held.has(candidate)) yield candidate;
    }
    // Then those this node keeps in a grace, no session on them: the registry may have given them back
    // since (another node made room for their owner, `#makeRoom`), and it alone says whether they are free.
    for (let i = 0; i < size; i++) {
      const candidate = first + ((start + i) % size);
      const held = this.#held.get(candidate);
      if (held !== undefined && held.connection === undefined) yield candidate;
    }
  }

  #hold(number: number, owner: string, epoch: number, account: string): HeldPort {
    const existing = this.#held.get(number);
    if (existing !== undefined && existing.owner === owner) {
      // Its owner again: the grace runs on until that session is ready (attach), as on one node.
      existing.epoch = epoch;
      return existing;
    }
    // Another owner's entry here is stale: the registry just gave the port away, so it was lost.
    if (existing !== undefined) this.#lose(existing, { owner, nodeId: this.#options.cluster.nodeId });
    const server = this.#listeners.get(number)!;
    const held = new HeldPort(number, owner, server, epoch, account);
    this.#held.set(number, held);
    return held;
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
    const connection = held.connection;
    held.connection = undefined;
    this.#options.logger.warn({ port: held.port, holder: holder.nodeId }, 'TCP: port taken over elsewhere');
    if (holder.owner === held.owner)
      connection?.close(ErrorCode.SESSION_REPLACED, 'replaced by a newer connection on another edge node');
    else connection?.close(ErrorCode.GOING_AWAY, 'TCP port taken over elsewhere');
  }

  /** Renews the leases of the ports served here (port-leases.ts); a registry that is away is retried next round. */
  async #renewAll(): Promise<void> {
    const served = [...this.#held.values()].filter(
      (h) => h.connection !== undefined && h.graceTimer === undefined,
    );
    if (served.length === 0) return;
    const { registry, logger, leaseTtlMs } = this.#options;
    try {
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

  #listen(number: number): Promise<boolean> {
    // allowHalfOpen: a client's FIN ends only its direction; the answer still flows (half-close).
    const server = createServer({ allowHalfOpen: true, noDelay: true });
    server.on('connection', (socket) => this.#onConnection(number, socket));
    return new Promise((resolve) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        this.#options.logger.debug({ err, port: number }, 'TCP port not available');
        resolve(false);
      };
      server.once('error', onError);
      // Not exclusive: in a worker of `--workers N` the workers share each port (node:cluster hands its
      // connections out in turn, or with reusePort each binds its own socket and the kernel spreads them;
      // either way carried to the holder like another node's); elsewhere it changes nothing.
      // exclusive with reusePort: a node:cluster worker binds its own socket instead of asking the primary.
      const flags = this.#options.reusePort === true ? { reusePort: true, exclusive: true } : {};
      server.listen({ port: number, host: this.#options.host, ...flags }, () => {
        server.off('error', onError);
        server.on('error', (err) => this.#options.logger.warn({ err, port: number }, 'TCP listener failed'));
        if (this.#closed) {
          server.close();
          resolve(false);
          return;
        }
        this.#listeners.set(number, server);
        resolve(true);
      });
    });
  }

  #onConnection(number: number, socket: Socket): void {
    const held = this.#servedHere(number);
    if (held !== undefined) {
      acceptTcpConnection(held, socket, this.counters, this.#options.logger, this.#options.inFlight);
      return;
    }
    this.#holds.route(number, socket);
  }

  /** The port as held here when its session can take a connection now: ready, and not handing over. */
  #servedHere(number: number): HeldPort | undefined {
    const held = this.#held.get(number);
    const connection = held?.connection;
    return connection?.ready === true && !connection.session.draining ? held : undefined;
  }
}

function refuse(code: EdgeErrorCode, message: string): TcpClaim {
  return { ok: false, code, message };
}
