import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCode, type MuxStream, type StreamResetError } from '@tunnel2/protocol';
import type { ClientOrigin } from '../access/client-address.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { sendRefusal } from '../answers/error-response.js';
import type { Refusal } from '../answers/refusals.js';
import { EdgeErrorCode } from '../errors.js';
import type { PublicMessage, PublicResponse } from '../exchange/public-message.js';
import { requestHasBody } from '../exchange/raw-http.js';
import { type ExchangeContext, TunnelExchange } from '../exchange/tunnel-exchange.js';
import type { CallDeadline } from './call-deadline.js';
import type { CrossNodeForwarder, OwnerEntry } from './cross-node.js';
import type { IngressRoute } from './ingress-route.js';
import { type PublicRequest, resolvePublicRequest } from './public-request.js';
import { type Arrival, dispatch, encodeForwardedHead, type TunnelIngressOptions } from './session-routing.js';
import { StreamUpgradeArrival, UpgradeArrival } from './upgrade-arrival.js';

// The HTTP/1.1 ingress, once build-edge.ts has parsed and routed a request: it resolves what the request
// is (public-request.ts) and hands it, as an HTTP/1.1 arrival, to session-routing.ts. An HTTP/2 ingress
// would be a sibling of this file: its own arrival, the same PublicRequest and everything after it.

/** Carries one routed public request into its session's tunnel, or answers why it cannot. */
export function handleTunnelRequest(
  req: PublicMessage,
  res: PublicResponse,
  route: IngressRoute,
  options: TunnelIngressOptions,
  via?: ClientOrigin,
): void {
  const request = resolvePublicRequest(req, route, options.clients, via);
  const arrival = new HttpArrival(request, res, options);
  dispatch(arrival, route, options, false);
  // A gRPC call with a deadline that did not start at once waits: its deadline bounds the wait.
  if (request.deadline !== undefined) arrival.bound(request.deadline);
}

/** Carries a public WebSocket upgrade into the tunnel: the backend's answer decides what happens next. */
export function handleTunnelUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: IngressRoute,
  options: TunnelIngressOptions,
  via?: ClientOrigin,
): void {
  const request = resolvePublicRequest(req, route, options.clients, via);
  dispatch(new UpgradeArrival(request, socket, head, options), route, options, false);
}

/**
 * Carries an RFC 8441 WebSocket (an HTTP/2 stream that listeners/http2-websocket.ts made an HTTP/1.1
 * upgrade request) into the tunnel, as `handleTunnelUpgrade` carries an HTTP/1.1 one.
 */
export function handleTunnelWebSocket(
  req: PublicMessage,
  res: PublicResponse,
  route: IngressRoute,
  options: TunnelIngressOptions,
  via?: ClientOrigin,
): void {
  const request = resolvePublicRequest(req, route, options.clients, via);
  dispatch(new StreamUpgradeArrival(request, res, options), route, options, false);
}

/**
 * A plain public request as an arrival, and the context of the exchange that carries it. A class rather
 * than an object of closures: the hot path allocates one object per request, its methods live on the
 * prototype (before, each start also made a context object and two closures for its exchange).
 */
class HttpArrival implements Arrival, ExchangeContext {
  readonly request: PublicRequest;
  readonly upgrade = false;
  readonly #res: PublicResponse;
  readonly #options: TunnelIngressOptions;
  /** Times a replica refused it before running it and it went to another (bounded). */
  #retries = 0;
  via: TunnelEntry | undefined = undefined;
  avoid: TunnelEntry | undefined = undefined;
  /** A gRPC call's time left when it starts (other requests pay nothing for it). */
  callTimeoutMs: number | undefined = undefined;
  /** The call's deadline passed while it waited, and was answered. */
  #expired = false;
  /** Carried to another node (what a call whose deadline passes was waiting for, for its message). */
  #across = false;

  constructor(request: PublicRequest, res: PublicResponse, options: TunnelIngressOptions) {
    this.request = request;
    this.#res = res;
    this.#options = options;
  }

  forward(owner: OwnerEntry, crossNode: CrossNodeForwarder, lost?: (owner: OwnerEntry) => void): void {
    this.#across = true;
    crossNode.forwardRequest(this.request, this.#res, owner, lost);
  }

  get gone(): boolean {
    return this.#expired || this.#res.destroyed;
  }

  refuse(refusal: Refusal): void {
    if (!this.#expired) sendRefusal(this.#res, refusal);
  }

  /**
   * A gRPC call's deadline bounds whatever it waits for until an exchange carries it: at the deadline it
   * is answered DEADLINE_EXCEEDED, and every wait it is in sees it gone (never sent to an agent after).
   */
  bound(deadline: CallDeadline): void {
    if (this.#res.writableEnded || this.#res.destroyed) return;
    // A closure for these calls only: an arrow field would cost every request one.
    deadline.arm(() => this.#expire());
    this.#res.once('close', deadline.cancel);
  }

  #expire(): void {
    const res = this.#res;
    if (this.gone || res.headersSent || res.writableEnded) return;
    this.#expired = true;
    const what = this.#across
      ? 'the node that holds its tunnel'
      : this.via !== undefined
        ? 'a free stream to its agent (the tunnel was at its limit of requests at once)'
        : 'its agent';
    sendRefusal(res, {
      code: EdgeErrorCode.RESPONSE_TIMEOUT,
      message: `tunnel ${this.request.route.name}: the call's deadline (grpc-timeout, ${this.request.deadline?.givenMs} ms) passed while it waited for ${what}`,
    });
  }

  watch(onGone: () => void): () => void {
    const res = this.#res;
    res.once('close', onGone);
    return () => res.off('close', onGone);
  }

  start(stream: MuxStream, payload: Buffer): void {
    const { req, deadline } = this.request;
    if (deadline !== undefined) {
      // The exchange's timer bounds the call from here, with the time left since its arrival.
      this.callTimeoutMs = deadline.hold();
      if (this.callTimeoutMs === 0) {
        stream.reset(ErrorCode.CANCEL);
        this.#expire();
        return;
      }
      // A wait for a stream slot since the head was written: the agent is told the time left now.
      if (deadline.stale && this.via !== undefined) {
        const encoded = encodeForwardedHead(this, this.request.route, this.via);
        if ('payload' in encoded) payload = encoded.payload;
      }
    }
    this.#options.inFlight.start();
    const crossNode = this.#options.crossNode;
    if (crossNode !== undefined) this.#res.setHeader('x-tunnel2-node', crossNode.nodeId);
    const exchange = new TunnelExchange(req, this.#res, stream, this);
    const hasBody = requestHasBody(req);
    stream.sendHeaders(payload, !hasBody);
    if (hasBody) exchange.pumpRequestBody();
    else req.resume();
  }

  // ExchangeContext: what its exchange reads of it. Each start counted itself in flight; each exchange
  // finishes once (a retry on another replica is a new start).
  get name(): string {
    return this.request.route.name;
  }

  get responseTimeoutMs(): number {
    return this.#options.responseTimeoutMs;
  }

  get maxRequestBodyBytes(): number {
    return this.#options.maxRequestBodyBytes;
  }

  get callGivenMs(): number | undefined {
    return this.request.deadline?.givenMs;
  }

  onFinish(): void {
    this.#options.inFlight.finish();
  }

  onUnanswered(error: StreamResetError): boolean {
    return this.#retryOnReplica(error);
  }

  /** The replica's agent went away while this request waited for a stream: a bodyless one goes elsewhere. */
  elsewhere(): boolean {
    const { req, route } = this.request;
    if (this.gone || requestHasBody(req) || this.#retries >= MAX_REPLICA_RETRIES) return false;
    if (this.via === undefined || !this.via.replica) return false;
    this.#retries++;
    this.avoid = this.via;
    dispatch(this, route, this.#options, false);
    return true;
  }

  /**
   * A replica refused the stream before running it (REFUSED_STREAM: its agent is going away and never saw
   * the head): a request without a body goes to another live replica of the name, at most
   * MAX_REPLICA_RETRIES times; anything else is answered as for a single agent.
   */
  #retryOnReplica(error: StreamResetError): boolean {
    const { req, route } = this.request;
    if (error.protocolCode !== ErrorCode.REFUSED_STREAM || this.#retries >= MAX_REPLICA_RETRIES) return false;
    if (this.gone || requestHasBody(req)) return false;
    const replicas = this.#options.sessions.replicas(route.name);
    const crossNode = this.#options.crossNode !== undefined && this.via?.replica === true;
    if (!crossNode && !replicas.some((entry) => entry.ready && !entry.session.draining)) return false;
    this.#retries++;
    this.avoid = this.via;
    // Not answered: the call waits again, under its deadline, until another exchange takes it.
    this.request.deadline?.release();
    // In a cluster the other replicas may be on other nodes: the routing looks there too.
    dispatch(this, route, this.#options, !crossNode);
    return true;
  }
}

/** How often one request may be refused by a replica and sent to another. */
const MAX_REPLICA_RETRIES = 2;
