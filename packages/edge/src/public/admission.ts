import {
  ErrorCode,
  encodeRequestHead,
  encodeTunnelTag,
  type MuxStream,
  ProtocolError,
  ProtocolErrorCode,
  type RequestHead,
  TUNNEL_TAG_SIZE,
} from '@tunnel2/protocol';
import type { SlotWaiter } from '../agents/stream-slots.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { agentTooOld, bodyTooLarge, busy, type Refusal, restarting } from '../answers/refusals.js';
import { EdgeErrorCode } from '../errors.js';

// What a request must pass before a stream of its session is spent on it, and how it gets one: shared by
// a public request on this node and one another node carries here over a node-to-node link.

/** What the checks need of a request: its credentials, who it comes from, what body it declares. */
export interface AdmissionRequest {
  authorization: string | undefined;
  /** The client address allow-lists are checked against. */
  clientAddress: string;
  /** The Content-Length it declares (0 when none). */
  declaredLength: number;
  /** A gRPC call (by its content type): it needs an agent that speaks HTTP/2 to its backend. */
  grpc: boolean;
}

/** The session's protection, drain state, rate limit and the edge's body limit; undefined when it passes. */
export function admit(
  connection: TunnelEntry,
  name: string,
  request: AdmissionRequest,
  maxRequestBodyBytes: number,
): Refusal | undefined {
  // A TCP tunnel's session has a name (the registry keys sessions by name) but no HTTP target behind it.
  if (connection.tcpPort !== undefined) {
    return { code: EdgeErrorCode.UNKNOWN_SESSION, message: `no HTTP tunnel named ${name}` };
  }
  const verdict = connection.protection?.check(request.authorization, request.clientAddress);
  if (verdict !== undefined && !verdict.ok) {
    return {
      code: verdict.status === 401 ? EdgeErrorCode.PUBLIC_AUTH_REQUIRED : EdgeErrorCode.PUBLIC_IP_FORBIDDEN,
      message: verdict.message,
      ...(verdict.status === 401
        ? { headers: { 'www-authenticate': 'Basic realm="tunnel2", charset="UTF-8"' } }
        : {}),
    };
  }
  // An agent from before HTTP/2 would pass the call on as HTTP/1.1 and drop its trailers: said at once.
  if (request.grpc && !connection.connection.http2) return agentTooOld(name, connection.connection.agent);
  if (connection.session.draining) return restarting(name);
  const retryAfterS = connection.rate?.take() ?? 0;
  if (retryAfterS > 0) {
    return {
      code: EdgeErrorCode.RATE_LIMITED,
      message: `tunnel ${name} is over its request rate: retry in ${retryAfterS} s`,
      retryAfterS,
    };
  }
  if (request.declaredLength > maxRequestBodyBytes) {
    return bodyTooLarge(request.declaredLength, maxRequestBodyBytes);
  }
  return undefined;
}

/** Whoever waits for a stream slot: started on one, refused, or gone meanwhile. */
export interface SlotClaimant {
  readonly gone: boolean;
  refuse(refusal: Refusal): void;
  start(stream: MuxStream, payload: Buffer): void;
  /** Calls `onGone` if the requester leaves; returns the unsubscribe. */
  watch(onGone: () => void): () => void;
  /**
   * The session's agent went away (GOAWAY) before the request got a stream, so it never ran: true when the
   * claimant took it elsewhere (another replica, another holder node); false to be refused as before.
   */
  elsewhere?(): boolean;
}

/** Opens a stream of the session at once, or after the bounded wait for a free slot, or refuses. */
export function acquireStream(
  connection: TunnelEntry,
  name: string,
  claimant: SlotClaimant,
  payload: Buffer,
): void {
  let stream: MuxStream | undefined;
  try {
    stream = connection.slots.tryOpen();
  } catch {
    claimant.refuse(restarting(name));
    return;
  }
  if (stream !== undefined) {
    claimant.start(stream, payload);
    return;
  }
  let unwatch = (): void => {};
  const waiter: SlotWaiter = {
    granted(granted) {
      unwatch();
      if (claimant.gone) granted.reset(ErrorCode.CANCEL);
      else claimant.start(granted, payload);
    },
    refused() {
      unwatch();
      if (connection.session.draining && claimant.elsewhere?.() === true) return;
      claimant.refuse(busy(name));
    },
  };
  if (!connection.slots.wait(waiter)) {
    if (connection.session.draining && claimant.elsewhere?.() === true) return;
    claimant.refuse(busy(name));
    return;
  }
  unwatch = claimant.watch(() => connection.slots.cancel(waiter));
}

/**
 * The request head for a tunnel's session (at most its agent's `maxFrameSize`), behind the tunnel's tag
 * when it is one the agent listed in HELLO (PROTOCOL.md "Several tunnels on one session"); or why not.
 */
export function encodeTunnelHead(
  head: RequestHead,
  tunnel: Pick<TunnelEntry, 'tag' | 'session'>,
): { payload: Buffer } | { refusal: Refusal } {
  const maxFrameSize = tunnel.session.peerSettings.maxFrameSize;
  if (tunnel.tag === 0) return encodeHead(head, maxFrameSize);
  const encoded = encodeHead(head, maxFrameSize - TUNNEL_TAG_SIZE);
  return 'refusal' in encoded ? encoded : { payload: encodeTunnelTag(tunnel.tag, encoded.payload) };
}

/** The request head as one HEADERS payload for a peer accepting frames up to `maxFrameSize`, or why not. */
export function encodeHead(
  head: RequestHead,
  maxFrameSize: number,
): { payload: Buffer } | { refusal: Refusal } {
  try {
    return { payload: encodeRequestHead(head, maxFrameSize) };
  } catch (err) {
    const tooLarge = err instanceof ProtocolError && err.code === ProtocolErrorCode.HEAD_TOO_LARGE;
    return {
      refusal: tooLarge
        ? {
            code: EdgeErrorCode.HEADERS_TOO_LARGE,
            message: `request head too large for the tunnel: ${(err as Error).message}`,
          }
        : { code: EdgeErrorCode.BAD_REQUEST, message: 'request head cannot be carried through the tunnel' },
    };
  }
}
