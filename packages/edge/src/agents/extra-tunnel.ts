import type { MuxSession } from '@tunnel2/protocol';
import type { CompiledProtection } from '../access/public-protection.js';
import type { StreamSlots } from './stream-slots.js';
import type { TcpPort } from './tcp-port.js';
import type { TokenBucket } from './token-bucket.js';
import type { AgentSession, TunnelEntry } from './tunnel-entry.js';

/** A tunnel an agent listed in its HELLO, served over that agent's session. */
export class ExtraTunnel implements TunnelEntry {
  readonly name: string;
  epoch: number;
  readonly owner: string;
  readonly account: string;
  /** The TCP port claimed for it (a TCP tunnel). */
  readonly port: TcpPort | undefined;
  readonly protection: CompiledProtection | undefined;
  readonly tag: number;
  /** A listed tunnel is its session's alone: replicas are asked for a session's own name. */
  readonly replica = false;
  readonly connection: AgentSession;

  constructor(fields: {
    name: string;
    epoch: number;
    port: TcpPort | undefined;
    protection: CompiledProtection | undefined;
    tag: number;
    connection: AgentSession;
  }) {
    this.name = fields.name;
    this.epoch = fields.epoch;
    this.owner = fields.connection.owner;
    this.account = fields.connection.account;
    this.port = fields.port;
    this.protection = fields.protection;
    this.tag = fields.tag;
    this.connection = fields.connection;
  }

  get tcpPort(): number | undefined {
    return this.port?.port;
  }
  get session(): MuxSession {
    return this.connection.session;
  }
  get leaving(): boolean {
    return this.connection.leaving;
  }
  get slots(): StreamSlots {
    return this.connection.slots;
  }
  get rate(): TokenBucket | undefined {
    return this.connection.rate;
  }
  get ready(): boolean {
    return this.connection.ready;
  }
  drain(reason: string): void {
    this.connection.drain(reason);
  }
  handOver(reason: string): void {
    this.connection.handOver(reason);
  }
  close(code?: number, reason?: string): void {
    this.connection.close(code, reason);
  }
}
