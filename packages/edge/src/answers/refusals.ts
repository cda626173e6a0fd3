import { EdgeErrorCode } from '../errors.js';
import { quoteForEcho } from './echo.js';

/** Why a public request cannot be carried to its tunnel, as the edge answers it. */
export interface Refusal {
  code: EdgeErrorCode;
  message: string;
  retryAfterS?: number;
  headers?: Record<string, string>;
}

export const unreachableOwner = (name: string, owner: { readonly nodeId: string }): Refusal => ({
  code: EdgeErrorCode.NODE_UNREACHABLE,
  message: `tunnel ${name}: the edge node holding it (${quoteForEcho(owner.nodeId, 64)}) cannot be reached`,
  retryAfterS: 5,
});

/** The HTTP hop between nodes is HTTP/1.1: an HTTP/2 request crosses nodes only over a node link. */
export const http2OverHop = (name: string, owner: { readonly nodeId: string }): Refusal => ({
  code: EdgeErrorCode.NODE_UNREACHABLE,
  message:
    `tunnel ${name}: its agent is on node ${owner.nodeId}, reached here only over the HTTP hop, which ` +
    'carries HTTP/1.1 (node links carry HTTP/2 requests)',
});

/** A gRPC call for an agent that did not say `http2` in its HELLO (PROTOCOL.md, capabilities). */
export const agentTooOld = (name: string, agent: string | undefined): Refusal => ({
  code: EdgeErrorCode.AGENT_TOO_OLD,
  message:
    `tunnel ${name}: its agent (${agent ?? 'an unnamed version'}) cannot carry gRPC or HTTP/2: upgrade ` +
    '@tunnel2/cli on the machine that runs it',
});

export const registryUnavailable = (name: string): Refusal => ({
  code: EdgeErrorCode.REGISTRY_UNAVAILABLE,
  message: `tunnel ${name} is not on this node and the session registry is unavailable to find it`,
  retryAfterS: 5,
});

export const busy = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_BUSY,
  message: `tunnel ${name} has too many requests in flight`,
  retryAfterS: 1,
});

/**
 * The request's tunnel, its owner or its client already has a quarter of the streams of the link to the
 * node holding the tunnel open (cluster/link/link-shares.ts): no one tenant may hold more of what every tenant
 * between two nodes shares.
 */
export const linkShareFull = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_BUSY,
  message: `tunnel ${name}: too many requests in flight to the node holding it for this tunnel, its owner or this client`,
  retryAfterS: 1,
});

export const restarting = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_BUSY,
  message: `tunnel ${name} is restarting: retry shortly`,
  retryAfterS: 1,
});

/** This node stops while the request waited for its way to the node holding the tunnel. */
export const nodeStopping = (name: string): Refusal => ({
  code: EdgeErrorCode.DRAINING,
  message: `tunnel ${name}: this edge node is shutting down: retry`,
  retryAfterS: 1,
});

/** A request read once the edge's teardown began: nothing carries it any more. */
export const edgeStopping: Readonly<Refusal> = {
  code: EdgeErrorCode.DRAINING,
  message: 'this edge is shutting down: retry',
  retryAfterS: 1,
};

export const offline = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_OFFLINE,
  message: `tunnel ${name} is offline: its agent is not connected`,
  retryAfterS: 5,
});

/**
 * A well-formed name no agent holds, asked for within the startup grace: the agents of the process this
 * one replaced may still be reconnecting. 503 with Retry-After, never the 404 that says the URL is gone.
 */
export const agentPending = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_PENDING,
  message: `tunnel ${quoteForEcho(name)} is not connected yet: this edge has just started and agents are still reconnecting, retry shortly`,
  retryAfterS: 2,
});

/** The agent's session ended after the request went to it (single node: its stream's SESSION_CLOSED). */
export const agentDisconnected = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_OFFLINE,
  message: `tunnel ${name} is offline: its agent disconnected`,
});

/** A declared request body beyond the edge's limit, refused before any of it is read. */
export const bodyTooLarge = (declared: number, limit: number): Refusal => ({
  code: EdgeErrorCode.BODY_TOO_LARGE,
  message: `request body of ${declared} bytes exceeds this edge's limit of ${limit}`,
});

/** A request or link upgrade that claims to come from another node and whose signature does not verify. */
export const nodeAuthRefusal: Readonly<Refusal> = {
  code: EdgeErrorCode.NODE_AUTH_INVALID,
  message: 'the request claims to come from another edge node but its signature does not verify',
};

export const unknownSession = (name: string): Refusal => ({
  code: EdgeErrorCode.UNKNOWN_SESSION,
  message: `no tunnel named ${quoteForEcho(name)} is connected to this edge`,
});
