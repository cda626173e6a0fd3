import type { Server, Socket } from 'node:net';
import { pickReplica } from './replica-choice.js';
import type { TunnelEntry } from './tunnel-entry.js';

/**
 * A public port claimed by an owner, and the sessions serving it when connected: one, or several when its
 * agents joined as replicas (`tunnel2 tcp --replica`, the same owner, all asked so). Each new connection
 * goes to one of them (`pick`).
 */
export class TcpPort {
  readonly port: number;
  readonly owner: string;
  /** Whom the port counts against for the limit (agent-account.ts): the token, or an anonymous agent's address. */
  readonly account: string;
  readonly server: Server;
  /** Once a session has served it, the port is its owner's reservation: a failed reconnect keeps it. */
  attached = false;
  graceTimer: NodeJS.Timeout | undefined;
  /** When its grace began, in the order graces begin on this node (the oldest is given back first). */
  graceOrder = 0;
  readonly sockets = new Set<Socket>();
  #entries: TunnelEntry[] = [];
  /** Where the next tie among replicas starts (replica-choice.ts). */
  #turn = 0;
  constructor(port: number, owner: string, server: Server, account = owner) {
    this.port = port;
    this.owner = owner;
    this.server = server;
    this.account = account;
  }

  /** The newest session serving the port (the one a non-replica claim replaces, a self-run check reads). */
  get connection(): TunnelEntry | undefined {
    return this.#entries[this.#entries.length - 1];
  }
  /** Serving the port from now on: this session alone. */
  set connection(entry: TunnelEntry | undefined) {
    this.#entries = entry === undefined ? [] : [entry];
  }

  /** Every session serving the port (several for replicas). */
  get entries(): readonly TunnelEntry[] {
    return this.#entries;
  }

  /** A replica joins the port's other replicas. */
  join(entry: TunnelEntry): void {
    this.#entries = [...this.#entries.filter((other) => other !== entry), entry];
  }

  /**
   * A session is ready to serve the port: a replica joins its owner's other replicas (replacing only an
   * older connection of its own run, a reconnect); anything else takes the port over alone. Returns the
   * sessions it replaced, for the caller to close; the replicas are told their count.
   */
  take(entry: TunnelEntry): TunnelEntry[] {
    const previous = this.#entries;
    const joins =
      entry.replica &&
      previous.every((other) => other.replica && other.owner === entry.owner && other !== entry);
    const run = joins ? entry.connection.run : undefined;
    const replaced = joins
      ? previous.filter((other) => run !== undefined && other.connection.run === run)
      : previous.filter((other) => other !== entry);
    for (const other of replaced) this.leave(other);
    if (joins) this.join(entry);
    else this.connection = entry;
    this.tellReplicas();
    return replaced;
  }

  /** The session stops serving the port; true if it did serve it. */
  leave(entry: TunnelEntry): boolean {
    const rest = this.#entries.filter((other) => other !== entry);
    const left = rest.length < this.#entries.length;
    this.#entries = rest;
    return left;
  }

  /**
   * Tells the port's replicas how many serve it now, not counting draining ones (a NOTICE to each whose
   * count changed: AgentConnection.tellReplicas), as a name's replicas are told (session-table.ts).
   */
  tellReplicas(): void {
    // Only replicas are told: a port served by one agent that did not ask to be a replica has nobody to tell.
    if (!this.#entries.some((entry) => entry.replica)) return;
    const live = this.#entries.filter((entry) => !entry.leaving && !entry.session.draining).length;
    for (const entry of this.#entries) if (entry.replica) entry.connection.tellReplicas?.(Math.max(1, live));
  }

  /**
   * The session a new connection goes to: of several replicas, the one with the fewest open streams (its
   * connections), none that is draining while another can take it (replica-choice.ts).
   */
  pick(avoid?: TunnelEntry): TunnelEntry | undefined {
    if (this.#entries.length <= 1) return this.#entries[0];
    this.#turn = (this.#turn + 1) % 0x40000000;
    return pickReplica(this.#entries, this.#turn, avoid);
  }
}
