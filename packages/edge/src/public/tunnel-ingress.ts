import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCode, type MuxStream, type StreamResetError } from '@tunnel2/protocol';
import type { ClientOrigin } from '../access/client-address.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { sendRefusal } from '../answers/error-response.js';
import type { Refusal } from '../answers/refusals.js';
import type { PublicMessage, PublicResponse } from '../exchange/public-message.js';
import { requestHasBody } from '../exchange/raw-http.js';
import { type ExchangeContext, TunnelExchange } from '../exchange/tunnel-exchange.js';
import type { CrossNodeForwarder, OwnerEntry } from './cross-node.js';
import { parseGrpcTimeout } from './grpc-timeout.js';
import type { IngressRoute } from './ingress-route.js';
import { type PublicRequest, resolvePublicRequest } from './public-request.js';
import { type Arrival, dispatch, type TunnelIngressOptions } from './session-routing.js';
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
  dispatch(new HttpArrival(request, res, options), route, options, false);
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
  /** A gRPC call's deadline, read when it starts (other requests pay nothing for it). */
  callTimeoutMs: number | undefined = undefined;

  constructor(request: PublicRequest, res: PublicResponse, options: TunnelIngressOptions) {
    this.request = request;
    this.#res = res;
    this.#options = options;
  }

  forward(owner: OwnerEntry, crossNode: CrossNodeForwarder, lost?: (owner: OwnerEntry) => void): void {
    crossNode.forwardRequest(this.request, this.#res, owner, lost);
  }

  get gone(): boolean {
    return this.#res.destroyed;
  }

  refuse(refusal: Refusal): void {
    sendRefusal(this.#res, refusal);
  }

  watch(onGone: () => void): () => void {
    const res = this.#res;
    res.once('close', onGone);
    return () => res.off('close', onGone);
  }

  start(stream: MuxStream, payload: Buffer): void {
    const { req } = this.request;
    this.#options.inFlight.start();
    const crossNode = this.#options.crossNode;
    if (crossNode !== undefined) this.#res.setHeader('x-tunnel2-node', crossNode.nodeId);
    if (this.request.grpc) this.callTimeoutMs = parseGrpcTimeout(req.headers['grpc-timeout']);
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
    // In a cluster the other replicas may be on other nodes: the routing looks there too.
    dispatch(this, route, this.#options, !crossNode);
    return true;
  }
}

/** How often one request may be refused by a replica and sent to another. */
const MAX_REPLICA_RETRIES = 2;
