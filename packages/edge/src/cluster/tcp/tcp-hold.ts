import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { TcpPort } from '../../agents/tcp-port.js';
import type { InFlight } from '../../exchange/in-flight.js';
import {
  CLUSTER_MAX_ROUNDS,
  CLUSTER_POLL_MS,
  type OwnerEntry,
  type OwnerFinding,
} from '../../public/cross-node.js';
import { acceptTcpConnection, type TcpCounters } from '../../tcp/tcp-connection.js';
import type { Cluster } from '../cluster.js';
import { carryTcpConnection } from './tcp-carry.js';

export interface TcpHoldsOptions {
  cluster: Cluster;
  counters: TcpCounters;
  inFlight: InFlight;
  /** Connections carried to other nodes (reset when the node closes). */
  carried: Set<Socket>;
  /** How long a connection waits for its port's agent to be served again (the same wait as HTTP's). */
  reconnectWaitMs: number;
  /** Connections one port may hold waiting at once; one more that has to wait is reset instead. */
  maxPerPort: number;
  /** Connections this node may hold waiting at once, every port together; beyond, reset instead. */
  maxPerNode: number;
  /** The port as held here when its session can take a connection now (ready, not draining). */
  servedHere(port: number): TcpPort | undefined;
  logger: Logger;
}

/** Connections this node holds waiting at once by default, every port together (one descriptor each). */
export const MAX_HELD_TCP_CONNECTIONS = 4096;

/**
 * How long a holder that did not answer or said "not here" is passed over (one poll): a node whose
 * session is still starting (claim recorded, agent not attached yet) refuses the same epoch it will
 * accept a moment later, so the same claim is tried again after this, a newer one at once.
 */
const PASSED_FOR_MS = CLUSTER_POLL_MS;

/** One connection waiting for its port's agent to be served somewhere it can be carried. */
interface Hold {
  readonly port: number;
  readonly socket: Socket;
  readonly deadline: number;
  /** Holders that did not answer or said "not here" (node#epoch), and until when they are passed over. */
  readonly passed: Map<string, number>;
  rounds: number;
  nones: number;
  /** Whether it was counted against the per-port and per-node bounds (it has had to wait). */
  admitted: boolean;
  /** Set while sleeping until the next round: cleared when it ends, or fired early (the agent arrived here). */
  timer: NodeJS.Timeout | undefined;
}

const ownerKey = (owner: OwnerEntry): string => `${owner.nodeId}#${owner.epoch}`;

/**
 * A cluster node's connections to ports it does not serve now: carried to the node holding the port, or,
 * while no node can take them (the holder drains, the agent is reconnecting, the record is being set up),
 * held and bounded — up to reconnectWaitMs, asking the registry every CLUSTER_POLL_MS as a waiting
 * HTTP request does, at most `maxPerPort` per port and `maxPerNode` in all — then carried to the node of
 * the newer claim, or opened here when the agent came back to this node. The bounds apply only to a
 * connection that has to wait (a live owner takes it at once however many others wait). Nothing is sent on
 * while it waits: Node reads up to the socket's high-water mark (64 KiB) into the socket's own buffer, and
 * that buffer goes first once the connection is carried or opened here, so no byte is lost (at most
 * `maxPerNode` × 64 KiB held in all). A port nobody holds, or a wait that runs out: reset, as on one node.
 * A held connection counts as in flight: a draining node waits for it (its grace).
 */
export class TcpHolds {
  readonly #options: TcpHoldsOptions;
  readonly #byPort = new Map<number, Set<Hold>>();
  #count = 0;
  #closed = false;

  constructor(options: TcpHoldsOptions) {
    this.#options = options;
  }

  /**
   * A connection to `port` that this node cannot give to an agent of its own now, or (`to`) one a port's
   * replica set sends to another holder node.
   */
  route(port: number, socket: Socket, to?: OwnerEntry): void {
    socket.on('error', () => {});
    if (this.#closed) {
      this.#options.counters.connections.no_agent++;
      socket.resetAndDestroy();
      return;
    }
    const hold: Hold = {
      port,
      socket,
      deadline: Date.now() + this.#options.reconnectWaitMs,
      passed: new Map(),
      rounds: 0,
      nones: 0,
      admitted: false,
      timer: undefined,
    };
    // A client gone while the registry is read or while it sleeps stops counting now (#end is idempotent).
    socket.once('close', () => this.#end(hold, 'reset'));
    // The first try needs no registry read when the owner is cached (the common case: a live holder),
    // and is not bounded: only a connection that has to wait counts against the bounds.
    // Of a port served by replicas on several nodes: the holder with the fewest connections carried from here.
    const { replicas } = this.#options.cluster;
    const key = `tcp:${port}`;
    const picked = to ?? (replicas.known(key) ? replicas.pick(key, false) : undefined);
    if (picked !== undefined && picked !== 'here') {
      this.#carry(hold, picked);
      return;
    }
    const cached = this.#options.cluster.cachedOwner(key);
    if (cached !== undefined) {
      this.#carry(hold, cached);
      return;
    }
    this.#enter(hold);
    this.#round(hold);
  }

  /** A session for `port` became ready here: its held connections go to it now. */
  wake(port: number): void {
    for (const hold of [...(this.#byPort.get(port) ?? [])]) this.#wakeUp(hold);
  }

  /** Resets every held connection (the node closes). */
  close(): void {
    this.#closed = true;
    for (const holds of [...this.#byPort.values()]) for (const hold of [...holds]) this.#end(hold, 'reset');
  }

  #enter(hold: Hold): void {
    let holds = this.#byPort.get(hold.port);
    if (holds === undefined) {
      holds = new Set();
      this.#byPort.set(hold.port, holds);
    }
    holds.add(hold);
    this.#count++;
    this.#options.counters.held++;
    this.#options.inFlight.start();
  }

  /**
   * Counts a connection that has to wait against the bounds (it is in the held set already): false, and
   * reset as `no_agent`, when its port or this node holds as many as they may.
   */
  #admit(hold: Hold): boolean {
    if (hold.admitted) return true;
    const others = (this.#byPort.get(hold.port)?.size ?? 1) - 1;
    if (this.#count - 1 >= this.#options.maxPerNode || others >= this.#options.maxPerPort) {
      this.#end(hold, 'reset');
      return false;
    }
    hold.admitted = true;
    return true;
  }

  /** Leaves the held set; `reset` also resets the client (no agent came in time). Idempotent. */
  #end(hold: Hold, how: 'reset' | 'handed'): void {
    const holds = this.#byPort.get(hold.port);
    if (holds === undefined || !holds.delete(hold)) return;
    if (holds.size === 0) this.#byPort.delete(hold.port);
    clearTimeout(hold.timer);
    hold.timer = undefined;
    hold.admitted = false;
    this.#count--;
    this.#options.counters.held--;
    if (how === 'reset' && !hold.socket.destroyed) {
      this.#options.counters.connections.no_agent++;
      hold.socket.resetAndDestroy();
    }
    this.#options.inFlight.finish();
  }

  #held(hold: Hold): boolean {
    return this.#byPort.get(hold.port)?.has(hold) === true;
  }

  /** Ends a sleep early; nothing when it is not sleeping (its registry read is still pending). */
  #wakeUp(hold: Hold): void {
    if (hold.timer === undefined) return;
    clearTimeout(hold.timer);
    hold.timer = undefined;
    this.#round(hold);
  }

  /** One round: the agent here, or where the registry says it is now. */
  #round(hold: Hold): void {
    if (!this.#held(hold)) return;
    if (hold.socket.destroyed || this.#closed) {
      this.#end(hold, 'reset');
      return;
    }
    hold.rounds++;
    const here = this.#options.servedHere(hold.port);
    if (here !== undefined) {
      const { counters, logger, inFlight } = this.#options;
      acceptTcpConnection(here, hold.socket, counters, logger, inFlight);
      this.#end(hold, 'handed');
      return;
    }
    // Holders passed over for now are left out of a replica set's choice (another holder is taken at once).
    const now = Date.now();
    const passed = new Set([...hold.passed].filter(([, until]) => until > now).map(([key]) => key));
    this.#options.cluster.find(`tcp:${hold.port}`, passed).then(
      (finding) => this.#answered(hold, finding),
      (err: unknown) => {
        this.#options.logger.warn({ err, port: hold.port }, 'TCP: owner lookup failed');
        this.#end(hold, 'reset');
      },
    );
  }

  #answered(hold: Hold, finding: OwnerFinding): void {
    if (!this.#held(hold)) return;
    if (hold.socket.destroyed) {
      this.#end(hold, 'reset');
      return;
    }
    if (finding.state === 'remote' && (hold.passed.get(ownerKey(finding.entry)) ?? 0) <= Date.now()) {
      this.#carry(hold, finding.entry);
      return;
    }
    // "None" is asked once more, after the registry answer's sharing period: it may be another
    // connection's answer from just before the port was claimed. Anything else is waited for.
    if (finding.state === 'none' && hold.nones++ > 0) {
      this.#end(hold, 'reset');
      return;
    }
    this.#sleep(hold, finding.state === 'none');
  }

  #sleep(hold: Hold, once: boolean): void {
    const remaining = hold.deadline - Date.now();
    if ((remaining <= 0 && !once) || hold.rounds >= CLUSTER_MAX_ROUNDS || this.#closed) {
      this.#end(hold, 'reset');
      return;
    }
    if (!this.#admit(hold)) return;
    hold.timer = setTimeout(
      () => {
        hold.timer = undefined;
        this.#round(hold);
      },
      once ? CLUSTER_POLL_MS : Math.min(CLUSTER_POLL_MS, remaining),
    );
    hold.timer.unref();
  }

  /**
   * Carries the connection to `owner`. It leaves the held set meanwhile (the carry counts itself in
   * flight); a holder that does not answer or says "not here" before taking it puts it back, bounded as
   * one that has to wait, that holder passed over for a poll, and the registry is asked again at once.
   */
  #carry(hold: Hold, owner: OwnerEntry): void {
    const { cluster, counters, inFlight, carried, logger } = this.#options;
    // Out of the held set before the carry starts (it may put the connection back at once), still in
    // flight throughout: a drain must not see zero in between.
    inFlight.start();
    this.#end(hold, 'handed');
    // A replica holder: counted as one more connection on it from here (its set's choice) while open.
    const key = `tcp:${hold.port}`;
    const untrack = owner.replica === true ? cluster.replicas.track(key, owner.nodeId) : () => {};
    hold.socket.once('close', untrack);
    carryTcpConnection(hold.socket, hold.port, owner, {
      cluster,
      counters,
      inFlight,
      sockets: carried,
      logger,
      unreachable: () => {
        untrack();
        hold.socket.off('close', untrack);
        if (owner.replica === true) cluster.replicas.drop(key, owner.nodeId);
        hold.passed.set(ownerKey(owner), Date.now() + PASSED_FOR_MS);
        if (this.#closed) {
          counters.connections.no_agent++;
          hold.socket.resetAndDestroy();
          return;
        }
        this.#enter(hold);
        if (this.#admit(hold)) this.#round(hold);
      },
    });
    inFlight.finish();
  }
}
