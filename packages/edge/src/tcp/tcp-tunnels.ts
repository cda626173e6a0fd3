import { createServer } from 'node:net';
import { ErrorCode } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { agentAccount } from '../agents/agent-account.js';
import type { PortClaims, TcpClaim } from '../agents/port-claims.js';
import { TcpPort } from '../agents/tcp-port.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { EdgeErrorCode } from '../errors.js';
import type { InFlight } from '../exchange/in-flight.js';
import { acceptTcpConnection, type TcpCounters } from './tcp-connection.js';
import type { TcpPortRange } from './tcp-port-range.js';

export interface TcpTunnelsOptions {
  range: TcpPortRange;
  /** Listen address of the public ports (the edge's own). */
  host: string;
  /**
   * Ports one token (or, for anonymous agents, one client address) may hold at once, those kept in their
   * reconnect grace included.
   */
  maxPortsPerOwner: number;
  /** How long a port whose session ended stays reserved for its owner. */
  reconnectGraceMs: number;
  /** The edge's count of work in flight: a drain waits for open connections too. */
  inFlight?: InFlight;
  logger: Logger;
}

/**
 * Who holds which public TCP port: the claims an agent's session makes (`PortClaims`), and what the edge
 * counts and starts. One node's own table (TcpTunnels), or a cluster's, claimed in the shared registry
 * (cluster/tcp/shared-tcp-ports.ts).
 */
export interface TcpPortTable extends PortClaims {
  readonly counters: TcpCounters;
  /** Ports held on this node. */
  readonly size: number;
  /** Called once the edge listens (a cluster node listens on the whole range then). */
  start(): Promise<void>;
  close(): void;
}

/**
 * The edge's public TCP ports: which owner holds which port, one listener per held port, and the grace a
 * port keeps after its session ends so a reconnect gets it back (as a name does). Single node: a cluster
 * claims ports in the shared registry instead (cluster/shared-tcp-ports.ts).
 */
export class TcpTunnels implements TcpPortTable {
  readonly counters: TcpCounters = {
    connections: { accepted: 0, forbidden: 0, no_agent: 0, refused: 0, forwarded: 0 },
    bytes: { in: 0, out: 0 },
    open: 0,
    held: 0,
  };
  readonly #ports = new Map<number, TcpPort>();
  /**
   * Ports handed back to their owner's newer claim (a reconnect in their grace, or a run replacing a live
   * session), until that session attaches or the claim is abandoned: never given up to make room for
   * another claim of the same account meanwhile, nor freed by the older session's graceful close (that
   * claim would then find its port gone at attach).
   */
  readonly #reclaimed = new Set<TcpPort>();
  readonly #options: TcpTunnelsOptions;
  #graces = 0;
  #closed = false;

  constructor(options: TcpTunnelsOptions) {
    this.#options = options;
  }

  get size(): number {
    return this.#ports.size;
  }

  /** One node listens on a port only while an owner holds it. */
  async start(): Promise<void> {}

  /** Claims `requested` (or any free port of the range) for `owner`, listening on it before it answers. */
  async claim(owner: string, requested: number | undefined, address?: string): Promise<TcpClaim> {
    if (this.#closed) return closing();
    const { first, last } = this.#options.range;
    if (requested !== undefined) {
      if (requested < first || requested > last) {
        return refuse(
          EdgeErrorCode.TCP_PORT_UNAVAILABLE,
          `port ${requested} is outside this edge's TCP range ${first}-${last}`,
        );
      }
      const held = this.#ports.get(requested);
      if (held !== undefined) {
        if (held.owner !== owner) {
          return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${requested} is in use by another agent`);
        }
        // Its owner again: a reconnect within the grace, or a newer connection that replaces the old one.
        // The grace runs on until that session is ready (attach): a reconnect whose upgrade then fails
        // must not cost the owner its port.
        // Marked even while live: a graceful close of the older session must not free the port under it.
        this.#reclaimed.add(held);
        return { ok: true, port: held };
      }
    }
    const account = agentAccount(owner, address);
    if (!this.#makeRoom(account)) return tooMany(this.#options.maxPortsPerOwner, address, 'on this edge');
    if (requested !== undefined) {
      const port = await this.#listen(requested, owner, account);
      return port === undefined
        ? refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${requested} is taken on this edge's host`)
        : { ok: true, port };
    }
    // From a random start, so a freed port is not handed straight to the next agent.
    const size = last - first + 1;
    const start = Math.floor(Math.random() * size);
    for (let i = 0; i < size; i++) {
      if (this.#closed) return closing();
      const candidate = first + ((start + i) % size);
      if (this.#ports.has(candidate)) continue;
      const port = await this.#listen(candidate, owner, account);
      if (port !== undefined) return { ok: true, port };
    }
    if (this.#closed) return closing();
    return refuse(
      EdgeErrorCode.TCP_PORTS_EXHAUSTED,
      `every TCP port of ${first}-${last} is in use on this edge`,
    );
  }

  /**
   * A claim that never got a session (the upgrade failed): a port no session ever served is freed; one
   * that served its owner before stays reserved for the grace, as if its last session had just ended.
   */
  abandon(port: TcpPort): void {
    this.#reclaimed.delete(port);
    if (port.connection !== undefined || this.#ports.get(port.port) !== port) return;
    if (port.attached) this.#startGrace(port);
    else this.#release(port);
  }

  /** The session is ready: connections to the port go to it from now on. */
  attach(port: TcpPort, connection: TunnelEntry): void {
    if (this.#ports.get(port.port) !== port) {
      // The grace ran out (or the edge closed) while this session's upgrade was under way: its listener
      // is gone. The agent reconnects and claims the port afresh.
      connection.close(ErrorCode.INTERNAL_ERROR, 'the TCP port was released before the session was ready');
      return;
    }
    // Cleared here and only here: the older session may have ended (starting the grace) after this one
    // claimed the port but before its HELLO.
    this.#resume(port);
    this.#reclaimed.delete(port);
    port.attached = true;
    const replaced = port.take(connection);
    for (const older of replaced) {
      // As with a name: the newer connection of the same owner wins, and the older agent is told not to
      // reconnect (else two agents would take the port from each other in turn).
      older.close(ErrorCode.SESSION_REPLACED, 'another agent with the same token took over this TCP port');
    }
  }

  /**
   * The session ended: the port stays its owner's for the grace, then closes; at once when its agent said
   * it was leaving (a graceful close).
   */
  detach(port: TcpPort, connection: TunnelEntry): void {
    if (!port.leave(connection)) {
      this.abandon(port);
      return;
    }
    // Its other replicas keep serving the port; their connections go on.
    if (port.connection !== undefined) {
      port.tellReplicas();
      return;
    }
    // Unless a newer claim of its owner has it meanwhile (not yet attached): that one keeps it.
    if (connection.leaving && !this.#reclaimed.has(port)) this.#release(port);
    else this.#startGrace(port);
  }

  /** Closes every listener and every carried connection. */
  close(): void {
    this.#closed = true;
    for (const port of [...this.#ports.values()]) this.#release(port);
  }

  /**
   * Room for one more port of `account`: true at once below the limit; at it, its oldest ports in their
   * grace are given back (a developer who restarts an agent, which comes back on a new port, must not lock
   * themselves out for the grace); false when all of them are in use. Ports count, grace or not, so one
   * address opening and closing tunnels in a loop holds at most the limit (issue #29).
   */
  #makeRoom(account: string): boolean {
    const held = [...this.#ports.values()].filter((port) => port.account === account);
    const excess = held.length - this.#options.maxPortsPerOwner + 1;
    if (excess <= 0) return true;
    const inGrace = held
      .filter(
        (port) =>
          port.graceTimer !== undefined && port.connection === undefined && !this.#reclaimed.has(port),
      )
      .sort((a, b) => a.graceOrder - b.graceOrder);
    if (inGrace.length < excess) return false;
    for (const port of inGrace.slice(0, excess)) {
      this.#options.logger.info(
        { port: port.port },
        'TCP: oldest port in its grace given back for a new claim',
      );
      this.#release(port);
    }
    return true;
  }

  #startGrace(port: TcpPort): void {
    if (this.#options.reconnectGraceMs === 0 || this.#closed) {
      this.#release(port);
      return;
    }
    // Already in its grace (a second failed reconnect): the grace is not extended.
    if (port.graceTimer !== undefined) return;
    port.graceOrder = ++this.#graces;
    port.graceTimer = setTimeout(() => this.#release(port), this.#options.reconnectGraceMs);
    port.graceTimer.unref();
  }

  #resume(port: TcpPort): void {
    if (port.graceTimer !== undefined) clearTimeout(port.graceTimer);
    port.graceTimer = undefined;
  }

  #release(port: TcpPort): void {
    this.#resume(port);
    this.#reclaimed.delete(port);
    if (this.#ports.get(port.port) === port) this.#ports.delete(port.port);
    port.server.close();
    for (const socket of port.sockets) socket.resetAndDestroy();
  }

  /** Listens on `port`; undefined when the host refuses it (another process holds it). */
  #listen(number: number, owner: string, account: string): Promise<TcpPort | undefined> {
    // allowHalfOpen: a client's FIN ends only its direction; the answer still flows (half-close).
    const server = createServer({ allowHalfOpen: true, noDelay: true });
    const port = new TcpPort(number, owner, server, account);
    // Held before listening, so a concurrent claim does not try the same port.
    this.#ports.set(number, port);
    server.on('connection', (socket) =>
      acceptTcpConnection(port, socket, this.counters, this.#options.logger, this.#options.inFlight),
    );
    return new Promise((resolve) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        if (this.#ports.get(number) === port) this.#ports.delete(number);
        this.#options.logger.debug({ err, port: number }, 'TCP port not available');
        resolve(undefined);
      };
      server.once('error', onError);
      // Released by close() before it listened: neither callback would come.
      server.once('close', () => resolve(undefined));
      server.listen({ port: number, host: this.#options.host, exclusive: true }, () => {
        server.off('error', onError);
        server.on('error', (err) => this.#options.logger.warn({ err, port: number }, 'TCP listener failed'));
        if (this.#closed) {
          this.#release(port);
          resolve(undefined);
          return;
        }
        resolve(port);
      });
    });
  }
}

/** The refusal of a claim over the limit, naming what it counts: the token, or an anonymous agent's address. */
export function tooMany(limit: number, address: string | undefined, where: string): TcpClaim {
  return refuse(
    EdgeErrorCode.TOO_MANY_TCP_PORTS,
    address === undefined
      ? `too many TCP ports for this agent token (at most ${limit} ${where}, none of them in its reconnect grace)`
      : `too many TCP ports from this address (at most ${limit} ${where}, none of them in its reconnect grace)`,
  );
}

function closing(): TcpClaim {
  return refuse(EdgeErrorCode.DRAINING, 'this edge is shutting down');
}

function refuse(code: EdgeErrorCode, message: string): TcpClaim {
  return { ok: false, code, message };
}
