import type { MuxSession } from '@tunnel2/protocol';
import type { CompiledProtection } from '../public/public-protection.js';
import type { TcpPort } from '../tcp/tcp-tunnels.js';
import type { AgentConnection } from './agent-connection.js';
import type { StreamSlots } from './stream-slots.js';
import type { TokenBucket } from './token-bucket.js';

/**
 * One public name served by an agent session. A session serves its own tunnel (the name in the agent
 * endpoint's URL: the AgentConnection itself, tag 0) and any tunnels its agent listed in HELLO (an
 * ExtraTunnel each, tag 1…n). The registry, the ingress and the TCP ports see only entries: each has its
 * own name, epoch, protection and TCP port, and shares the session's streams, slots and rate limit.
 */
export interface TunnelEntry {
  readonly name: string;
  /** The registry epoch this entry holds its name under (a re-claim after an outage moves it). */
  epoch: number;
  readonly owner: string;
  /**
   * Whom it counts against (agent-account.ts): its owner, or an anonymous agent's client address. Recorded
   * with its claim, so a node link counts its share by it (cluster/link-shares.ts).
   */
  readonly account: string;
  /** The public TCP port this tunnel serves, else undefined (an HTTP tunnel). */
  readonly tcpPort: number | undefined;
  readonly protection: CompiledProtection | undefined;
  /** 0: the session's own tunnel (untagged heads); n ≥ 1: the agent's n-th listed tunnel. */
  readonly tag: number;
  /** The agent connection carrying it. */
  readonly connection: AgentConnection;
  readonly session: MuxSession;
  readonly slots: StreamSlots;
  readonly rate: TokenBucket | undefined;
  readonly ready: boolean;
  /** Its agent said it is shutting down: what it holds is freed at once when the session ends (no grace). */
  readonly leaving: boolean;
  drain(reason: string): void;
  handOver(reason: string): void;
  /** Ends the whole session: its tunnels come and go together (the agent reconnects them all). */
  close(code?: number, reason?: string): void;
}

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
  readonly connection: AgentConnection;

  constructor(fields: {
    name: string;
    epoch: number;
    port: TcpPort | undefined;
    protection: CompiledProtection | undefined;
    tag: number;
    connection: AgentConnection;
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
