import type { Duplex } from 'node:stream';
import type { PublicResponse } from '../exchange/public-message.js';
import type { PublicRequest } from './public-request.js';

// Cluster mode as the public ingress sees it. The ingress declares what it needs here and the cluster
// plugs in behind it (cluster/cross-node-forwarder.ts), so nothing under public/ imports cluster/: on one
// node there is no forwarder, and a second ingress (HTTP/2) would use the same one.

// The fields one node states to another. The cluster writes them and believes them only when signed (a
// hop) or on an authenticated link; the ingress strips them from every client's request
// (forwarding-headers.ts), so they are named here rather than in cluster/.
/** The header a node signs a forwarded request with. */
export const NODE_AUTH_HEADER = 'x-tunnel2-node-auth';
/** The client's TCP peer as the first node saw it (appended to X-Forwarded-For by the serving node). */
export const NODE_PEER_HEADER = 'x-tunnel2-node-peer';
/** The client address the first node decided on (what allow-lists are checked against). */
export const NODE_CLIENT_HEADER = 'x-tunnel2-node-client';

/** On a link stream's request head: the session the request is for (the ingress routed it). */
export const LINK_SESSION_HEADER = 'x-tunnel2-link-session';
/** On a link stream's request head: the client address the ingress decided on (for allow-lists). */
export const LINK_CLIENT_HEADER = 'x-tunnel2-link-client';

/** Where a session lives, as this node last learned it from the registry (the owner cache keeps these). */
export interface OwnerEntry {
  readonly nodeId: string;
  readonly url: string;
  readonly epoch: number;
  /**
   * Whom the session counts against, as the registry has it (its token's owner key, or an anonymous
   * agent's `addr:<ip>`, agent-account.ts): its share of a node link is counted by it too. The owner key
   * for a record an older node wrote, which has no account.
   */
  readonly account?: string | undefined;
  /** One holder of the name's replica set (replicas on several nodes); `epoch` is its place's. */
  readonly replica?: boolean | undefined;
}

/** How a request remembers an owner it tried (`passed`): its node and the epoch of its claim. */
export function ownerKey(owner: Pick<OwnerEntry, 'nodeId' | 'epoch'>): string {
  return `${owner.nodeId}#${owner.epoch}`;
}

/** What the registry says about a name a request is waiting for (see `Cluster.find`). */
export type OwnerFinding =
  | { state: 'remote'; entry: OwnerEntry }
  | { state: 'here' }
  | { state: 'pending' }
  | { state: 'none' };

/**
 * How often a request or a TCP connection waiting for its agent asks the registry where the agent is now
 * (session-routing.ts, cluster/tcp/tcp-hold.ts).
 */
export const CLUSTER_POLL_MS = 200;
/** Bound on the rounds of one such wait, whatever the clock does (reconnectWaitMs is at most 60 s). */
export const CLUSTER_MAX_ROUNDS = 400;

/**
 * Finds the node holding a name and carries a public request or upgrade there: over the node link when
 * one reaches that node, else over the HTTP hop. `lost` takes back a request that can be sent again when
 * the owner cannot be reached or no longer holds the session (see cluster/forward-arrival.ts).
 */
export interface CrossNodeForwarder {
  /** This node's id (each answer says which node served it). */
  readonly nodeId: string;
  /** The owner of `name`, from the owner cache or else the registry; undefined when no live node holds it. */
  owner(name: string): Promise<OwnerEntry | undefined>;
  /**
   * Where `name` stands, asked of the registry itself while a request waits for its agent; of a replica
   * set's holders, one not in `passed` (ownerKey).
   */
  find(name: string, passed?: ReadonlySet<string>): Promise<OwnerFinding>;
  /**
   * A name this node serves replicas of, when other nodes hold replicas of it too: where the next request
   * goes, `here` or another holder, by the requests this node has outstanding on each (not in `passed`).
   */
  pickHolder(name: string, passed?: ReadonlySet<string>): OwnerEntry | 'here';
  /** Counts a request this node sent to `nodeId` (itself included) for a replicated `name`; returns its end. */
  track(name: string, nodeId: string): () => void;
  /** Carries the request as the ingress resolved it: the cluster never works its client out again. */
  forwardRequest(
    request: PublicRequest,
    res: PublicResponse,
    owner: OwnerEntry,
    lost?: (owner: OwnerEntry) => void,
  ): void;
  forwardUpgrade(request: PublicRequest, socket: Duplex, head: Buffer, owner: OwnerEntry): void;
  /** An RFC 8441 WebSocket (an HTTP/2 stream), carried as the same HTTP/1.1 upgrade over the HTTP hop. */
  forwardStreamUpgrade(request: PublicRequest, res: PublicResponse, owner: OwnerEntry): void;
}
