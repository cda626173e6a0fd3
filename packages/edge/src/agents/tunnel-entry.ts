import type { MuxSession } from '@tunnel2/protocol';
import type { CompiledProtection } from '../access/public-protection.js';
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
   * with its claim, so a node link counts its share by it (cluster/link/link-shares.ts).
   */
  readonly account: string;
  /** The public TCP port this tunnel serves, else undefined (an HTTP tunnel). */
  readonly tcpPort: number | undefined;
  readonly protection: CompiledProtection | undefined;
  /** 0: the session's own tunnel (untagged heads); n ≥ 1: the agent's n-th listed tunnel. */
  readonly tag: number;
  /** The agent connection carrying it (the session's own entry: an AgentConnection). */
  readonly connection: AgentSession;
  readonly session: MuxSession;
  readonly slots: StreamSlots;
  readonly rate: TokenBucket | undefined;
  readonly ready: boolean;
  /**
   * Its agent joined the name as a replica (`--replica`): other agents of the same owner that asked so too
   * may serve the name beside it (session-table.ts, replica-choice.ts).
   */
  readonly replica: boolean;
  /** Its agent said it is shutting down: what it holds is freed at once when the session ends (no grace). */
  readonly leaving: boolean;
  drain(reason: string): void;
  handOver(reason: string): void;
  /** Ends the whole session: its tunnels come and go together (the agent reconnects them all). */
  close(code?: number, reason?: string): void;
}

/**
 * The session's own tunnel (tag 0), which carries the others: what an entry's users read of the agent
 * connection behind it. AgentConnection is the one implementation; declared here so that entries, the
 * session table and the TCP ports need not import the connection (which imports its extra tunnels).
 */
export interface AgentSession extends TunnelEntry {
  /**
   * The agent said `http2` in its HELLO: it passes request trailers on and can speak HTTP/2 to its backend,
   * so gRPC calls may be given to it.
   */
  readonly http2: boolean;
  /** What the agent calls itself in its HELLO (`tunnel2/<version>`), when it said. */
  readonly agent: string | undefined;
  /** The agent's run id (`x-tunnel2-agent-run`), when it sent one (name-holder.ts). */
  readonly run: string | undefined;
  /** When the agent connected (ms since the epoch). */
  readonly connectedAt: number;
  /** A replica's agent: how many agents serve its name now (sent when it changed). */
  tellReplicas?(count: number): void;
}
