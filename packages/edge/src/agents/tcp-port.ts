import type { Server, Socket } from 'node:net';
import type { TunnelEntry } from './tunnel-entry.js';

/** A public port claimed by an owner, and the session serving it when one is connected. */
export class TcpPort {
  readonly port: number;
  readonly owner: string;
  /** Whom the port counts against for the limit (agent-account.ts): the token, or an anonymous agent's address. */
  readonly account: string;
  readonly server: Server;
  connection: TunnelEntry | undefined;
  /** Once a session has served it, the port is its owner's reservation: a failed reconnect keeps it. */
  attached = false;
  graceTimer: NodeJS.Timeout | undefined;
  /** When its grace began, in the order graces begin on this node (the oldest is given back first). */
  graceOrder = 0;
  readonly sockets = new Set<Socket>();
  constructor(port: number, owner: string, server: Server, account = owner) {
    this.port = port;
    this.owner = owner;
    this.server = server;
    this.account = account;
  }
}
