import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { SessionTable } from '../agents/session-table.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { rejectUpgrade, sendRefusal } from '../answers/error-response.js';
import {
  agentPending,
  nodeStopping,
  offline,
  type Refusal,
  registryUnavailable,
  unknownSession,
  unreachableOwner,
} from '../answers/refusals.js';
import { EdgeErrorCode } from '../errors.js';
import type { InFlight } from '../exchange/in-flight.js';
import { requestHasBody } from '../exchange/raw-http.js';
import { TunnelExchange } from '../exchange/tunnel-exchange.js';
import { UpgradeTunnel } from '../exchange/upgrade-tunnel.js';
import { acquireStream, admit, encodeTunnelHead } from './admission.js';
import type { ClientOrigin, ClientOriginResolver } from './client-address.js';
import {
  CLUSTER_MAX_ROUNDS,
  CLUSTER_POLL_MS,
  type CrossNodeForwarder,
  type OwnerEntry,
  type OwnerFinding,
} from './cross-node.js';
import { forwardedHeaders } from './forwarding-headers.js';
import { type IngressRoute, isValidSessionName } from './ingress-route.js';
import { missingSession } from './missing-session.js';
import { type PublicRequest, resolvePublicRequest } from './public-request.js';
import type { StartupGrace } from './startup-grace.js';

export interface TunnelIngressOptions {
  sessions: SessionTable;
  responseTimeoutMs: number;
  logger: Logger;
  /** Counts requests in flight (for drain and metrics). */
  inFlight: InFlight;
  maxRequestBodyBytes: number;
  /** How long a request for a reconnecting agent's name waits for it (0: answer 502 at once). */
  reconnectWaitMs: number;
  /** Decides who a request comes from (the peer, or what a trusted proxy in front says). */
  clients: ClientOriginResolver;
  /** Cluster mode: finds the node holding a name and carries requests there. Undefined on one node. */
  crossNode?: CrossNodeForwarder | undefined;
  /** The window after start in which a name nobody holds waits for its agent, then gets 503 (not 404). */
  startup: StartupGrace;
  /** True once the edge's drain began (SIGTERM): its sessions were told to stop with it. */
  isDraining: () => boolean;
}

/** One public request or upgrade, as the routing below needs it: it is refused, or started on a stream. */
interface Arrival {
  /** What the request is, resolved once (public-request.ts). */
  readonly request: PublicRequest;
  readonly upgrade: boolean;
  refuse(refusal: Refusal): void;
  start(stream: MuxStream, payload: Buffer): void;
  /** True once the client has gone away (a waiting request then leaves its queue). */
  readonly gone: boolean;
  /** Calls `onGone` if the client disconnects; returns the unsubscribe. */
  watch(onGone: () => void): () => void;
  /**
   * Carries the arrival to the node holding its session (cluster mode). With `lost`, a request that can
   * be sent again (no body, nothing written to the client) whose owner cannot be reached or no longer
   * holds the session is handed to `lost` instead of being refused.
   */
  forward(owner: OwnerEntry, crossNode: CrossNodeForwarder, lost?: (owner: OwnerEntry) => void): void;
}

/**
 * Routes an arrival to its session: checks what the agent asked the edge to enforce and the session's
 * limits, then opens a stream — at once, or after a bounded wait for a free slot, or (when the agent is
 * reconnecting) after a bounded wait for it to come back.
 */
function dispatch(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  waited: boolean,
): void {
  const connection = options.sessions.get(route.name);
  // In a cluster, a session draining here (its agent told to go elsewhere) is looked for on other nodes;
  // a request another node forwarded is never forwarded again and gets "offline" so that node looks.
  const leaving = connection !== undefined && options.crossNode !== undefined && connection.session.draining;
  if (leaving && arrival.request.vouched) {
    arrival.refuse(offline(route.name));
    return;
  }
  // One node draining: its agents were told to stop with it and nothing else can carry the request. Said
  // as the edge's drain (503 DRAINING, retry), not as a busy tunnel whose agent is shutting down.
  if (connection !== undefined && options.crossNode === undefined && options.isDraining()) {
    arrival.refuse(nodeStopping(route.name));
    return;
  }
  if (connection === undefined || !connection.ready || leaving) {
    if (waited) arrival.refuse(offline(route.name));
    else void awaitAgent(arrival, route, options);
    return;
  }
  const prepared = prepare(arrival, route, connection, options);
  if ('refusal' in prepared) arrival.refuse(prepared.refusal);
  else acquireStream(connection, route.name, arrival, prepared.payload);
}

/** The checks made before a stream is spent on a request; the encoded request head when they pass. */
function prepare(
  arrival: Arrival,
  route: IngressRoute,
  connection: TunnelEntry,
  options: TunnelIngressOptions,
): { payload: Buffer } | { refusal: Refusal } {
  const request = arrival.request;
  const refusal = admit(connection, route.name, request, options.maxRequestBodyBytes);
  if (refusal !== undefined) return { refusal };
  const headers = forwardedHeaders(request);
  // An upgrade keeps the two fields that ask for it; everything else hop-by-hop is dropped.
  if (arrival.upgrade) headers.push('Connection', 'Upgrade', 'Upgrade', String(request.req.headers.upgrade));
  return encodeTunnelHead({ method: request.method, target: route.target, headers }, connection);
}

/** The name has no live agent here: a reserved name waits (bounded) for its agent to reconnect. */
async function awaitAgent(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
): Promise<void> {
  // The one cluster branch: the owner is another node. A request another node forwarded is answered here.
  const crossNode = options.crossNode;
  if (crossNode !== undefined && !arrival.request.vouched && isValidSessionName(route.name)) {
    // In flight from here: a draining node must not tear down under a request whose owner is being looked
    // up (a registry round trip). The forward and the wait below count themselves before this finishes.
    options.inFlight.start();
    try {
      let owner: OwnerEntry | undefined;
      try {
        owner = await crossNode.owner(route.name);
      } catch {
        owner = undefined; // missingSession below asks again and says the registry is unreachable
      }
      if (arrival.gone) return;
      const deadline = Date.now() + options.reconnectWaitMs;
      const passed = new Set<string>();
      // A waiting request counts as in flight: a draining node must not stop under it.
      const wait = (): void => {
        options.inFlight.start();
        void awaitAcrossNodes(arrival, route, options, crossNode, deadline, passed, lost).finally(() =>
          options.inFlight.finish(),
        );
      };
      const lost = (gone: OwnerEntry): void => {
        passed.add(ownerKey(gone));
        wait();
      };
      if (owner !== undefined) arrival.forward(owner, crossNode, lost);
      else wait();
    } finally {
      options.inFlight.finish();
    }
    return;
  }
  const refusal = await missingSession(route.name, options.sessions);
  if (arrival.gone) return;
  // The agent arrived while the registry answered: serve it rather than wait for an arrival already past.
  if (options.sessions.get(route.name)?.ready === true) {
    dispatch(arrival, route, options, true);
    return;
  }
  // A forwarded request is answered at once: the node that forwarded it does the waiting.
  if (
    refusal.code === EdgeErrorCode.UNKNOWN_SESSION &&
    !arrival.request.vouched &&
    startupWait(route.name, options)
  ) {
    awaitClaim(arrival, route, options);
    return;
  }
  if (refusal.code !== EdgeErrorCode.TUNNEL_OFFLINE || options.reconnectWaitMs === 0) {
    arrival.refuse(refusal);
    return;
  }
  let unwatch = (): void => {};
  const cancel = options.sessions.awaitArrival(route.name, options.reconnectWaitMs, (connection) => {
    unwatch();
    if (arrival.gone) return;
    if (connection === undefined) arrival.refuse(refusal);
    else dispatch(arrival, route, options, true);
  });
  if (cancel === undefined) arrival.refuse(refusal);
  else unwatch = arrival.watch(cancel);
}

/** A name that deserves the startup grace: well-formed (anything else is a prompt 404), asked for within it. */
function startupWait(name: string, options: TunnelIngressOptions): boolean {
  return options.startup.active && isValidSessionName(name);
}

/**
 * Within the startup grace, a name nobody holds: waits up to reconnectWaitMs for an agent to claim it
 * (counted in the grace's bound, and in the per-name bound of the session table), else 503 + Retry-After.
 */
function awaitClaim(arrival: Arrival, route: IngressRoute, options: TunnelIngressOptions): void {
  const pending = agentPending(route.name);
  const startup = options.startup;
  if (options.reconnectWaitMs === 0 || !startup.enter()) {
    arrival.refuse(pending);
    return;
  }
  let unwatch = (): void => {};
  const cancel = options.sessions.awaitArrival(route.name, options.reconnectWaitMs, (connection) => {
    startup.leave();
    unwatch();
    if (arrival.gone) return;
    if (connection === undefined) arrival.refuse(pending);
    else dispatch(arrival, route, options, true);
  });
  if (cancel === undefined) {
    startup.leave();
    arrival.refuse(pending);
    return;
  }
  unwatch = arrival.watch(() => {
    cancel();
    startup.leave();
  });
}

function ownerKey(owner: OwnerEntry): string {
  return `${owner.nodeId}#${owner.epoch}`;
}

/**
 * The reconnect wait across nodes: until `deadline`, asks the registry every CLUSTER_POLL_MS where the
 * session is, and forwards as soon as it is live on a node that answers (an owner in `passed` did not
 * answer, or no longer held it: only a newer claim is tried), or dispatches here once the agent arrives
 * here. A record left by a dead node (its node unannounced or unreachable) is waited out like a
 * reconnecting agent: the agent claims the name again elsewhere with a newer epoch. Never a hang: the
 * wait ends at the deadline with 502 (offline, or the node that did not answer), and the number of
 * waiters per name is the session table's bound. A name no record holds is a 404 at once, startup grace
 * or not. Within the grace, a wait that ends without the agent is a 503 + Retry-After rather than the 502.
 */
async function awaitAcrossNodes(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  crossNode: CrossNodeForwarder,
  deadline: number,
  passed: Set<string>,
  lost: (owner: OwnerEntry) => void,
): Promise<void> {
  let last: OwnerEntry | undefined;
  for (let round = 0; round < CLUSTER_MAX_ROUNDS; round++) {
    const local = options.sessions.get(route.name);
    if (local?.ready === true && !local.session.draining) {
      dispatch(arrival, route, options, true);
      return;
    }
    let finding: OwnerFinding;
    try {
      finding = await crossNode.find(route.name);
    } catch {
      if (!arrival.gone) arrival.refuse(registryUnavailable(route.name));
      return;
    }
    if (arrival.gone) return;
    // A name the registry has never held (or no longer does) is not waited for, startup grace or not: the
    // registry outlives a node's restart, so an agent on its way back still has its record (held by a dead
    // node, or reserved for its owner). Waiting here would let a scan of random names after every node
    // start cost a registry lookup every CLUSTER_POLL_MS for each of thousands of waiters.
    if (finding.state === 'none') {
      arrival.refuse(unknownSession(route.name));
      return;
    }
    if (finding.state === 'remote') {
      if (!passed.has(ownerKey(finding.entry))) {
        arrival.forward(finding.entry, crossNode, lost);
        return;
      }
      last = finding.entry;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    // Wakes early when the agent arrives here; otherwise asks the registry again after the poll period.
    const outcome = await new Promise<'next' | 'full'>((resolve) => {
      let unwatch = (): void => {};
      const cancel = options.sessions.awaitArrival(route.name, Math.min(CLUSTER_POLL_MS, remaining), () => {
        unwatch();
        resolve('next');
      });
      if (cancel === undefined) resolve('full');
      else
        unwatch = arrival.watch(() => {
          cancel();
          resolve('next');
        });
    });
    if (arrival.gone) return;
    if (outcome === 'full') break;
  }
  // Within the startup grace, a name whose agent is not back (a record from before the restart that no
  // live node holds) is a 503 like on one node: after a cluster restart agents are on their way.
  if (last === undefined && options.startup.active) arrival.refuse(agentPending(route.name));
  else arrival.refuse(last === undefined ? offline(route.name) : unreachableOwner(route.name, last));
}

/**
 * A plain public request as an arrival. A class rather than an object of closures: the hot path allocates
 * one object per request, its methods live on the prototype.
 */
class HttpArrival implements Arrival {
  readonly request: PublicRequest;
  readonly upgrade = false;
  readonly #res: ServerResponse;
  readonly #options: TunnelIngressOptions;

  constructor(request: PublicRequest, res: ServerResponse, options: TunnelIngressOptions) {
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
    const { req, route } = this.request;
    const inFlight = this.#options.inFlight;
    inFlight.start();
    const crossNode = this.#options.crossNode;
    if (crossNode !== undefined) this.#res.setHeader('x-tunnel2-node', crossNode.nodeId);
    const exchange = new TunnelExchange(req, this.#res, stream, {
      name: route.name,
      responseTimeoutMs: this.#options.responseTimeoutMs,
      maxRequestBodyBytes: this.#options.maxRequestBodyBytes,
      onFinish: () => inFlight.finish(),
    });
    const hasBody = requestHasBody(req);
    stream.sendHeaders(payload, !hasBody);
    if (hasBody) exchange.pumpRequestBody();
    else req.resume();
  }
}

/** Carries one routed public request into its session's tunnel, or answers why it cannot. */
export function handleTunnelRequest(
  req: IncomingMessage,
  res: ServerResponse,
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
  const arrival: Arrival = {
    request,
    upgrade: true,
    forward(owner, crossNode) {
      crossNode.forwardUpgrade(request, socket, head, owner);
    },
    refuse: (refusal) => rejectUpgrade(socket, refusal),
    start(stream, payload) {
      options.inFlight.start();
      const tunnel = new UpgradeTunnel(socket, stream, {
        name: route.name,
        responseTimeoutMs: options.responseTimeoutMs,
        onFinish: () => options.inFlight.finish(),
      });
      stream.sendHeaders(payload, false);
      tunnel.pumpClientBytes(head);
    },
    get gone() {
      return socket.destroyed;
    },
    watch(onGone) {
      socket.once('close', onGone);
      return () => socket.off('close', onGone);
    },
  };
  dispatch(arrival, route, options, false);
}
