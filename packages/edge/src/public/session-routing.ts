import type { MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { ClientOriginResolver } from '../access/client-address.js';
import { isValidSessionName } from '../agents/session-name.js';
import type { SessionTable } from '../agents/session-table.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
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
import { acquireStream, admit, encodeTunnelHead } from './admission.js';
import {
  CLUSTER_MAX_ROUNDS,
  CLUSTER_POLL_MS,
  type CrossNodeForwarder,
  type OwnerEntry,
  type OwnerFinding,
  ownerKey,
} from './cross-node.js';
import { forwardedHeaders } from './forwarding-headers.js';
import type { IngressRoute } from './ingress-route.js';
import { missingSession } from './missing-session.js';
import type { PublicRequest } from './public-request.js';
import type { StartupGrace } from './startup-grace.js';

// Where a resolved request goes, whatever ingress parsed it: the one place that chooses between the local
// forwarder (its agent is here: `forwardHere` below) and the cross-node one (`Arrival.forward`, behind
// cross-node.ts), and that waits, bounded, for an agent that is not live yet (reconnecting, starting up,
// or to be found on another node). Refusals come from ../answers/refusals.ts and leave by `Arrival.refuse`.

/**
 * A resolved request together with what the routing may do with its client's connection: refuse it,
 * start it on a stream, carry it to another node, notice the client leaving. Each kind of public
 * connection implements it (tunnel-ingress.ts: an HTTP/1.1 request and a WebSocket upgrade; an HTTP/2
 * stream next); everything after the ingress reads only this.
 */
export interface Arrival {
  /** What the request is, resolved once (public-request.ts). */
  readonly request: PublicRequest;
  readonly upgrade: boolean;
  refuse(refusal: Refusal): void;
  start(stream: MuxStream, payload: Buffer): void;
  /** The entry the request was last started on (a replica that refuses it is then avoided). */
  via: TunnelEntry | undefined;
  /** A replica that refused the request before running it: the next try goes elsewhere if it can. */
  readonly avoid: TunnelEntry | undefined;
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

/** What the public ingress runs with (build-edge.ts assembles it once; every request reads it). */
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

/**
 * Routes an arrival to its session: to the local forwarder when its agent is live here (`forwardHere`:
 * the agent's protection and the session's limits, then a stream at once or after a bounded wait for a
 * free slot); else to the wait for its agent (`awaitAgent`), which carries it to another node or comes
 * back here once the agent arrives.
 */
export function dispatch(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  waited: boolean,
): void {
  const connection = options.sessions.get(route.name, arrival.avoid);
  const crossNode = options.crossNode;
  // Replicas on several nodes: this node's (live) replicas are one holder of the name among the others.
  if (
    crossNode !== undefined &&
    connection?.replica === true &&
    connection.ready &&
    !connection.session.draining &&
    !arrival.request.vouched
  ) {
    const holder = crossNode.pickHolder(route.name, passedBy.get(arrival));
    if (holder !== 'here') {
      forwardAcross(arrival, route, options, crossNode, holder);
      return;
    }
    if (!arrival.upgrade) arrival.watch(crossNode.track(route.name, crossNode.nodeId));
  }
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
  forwardHere(arrival, route, connection, options);
}

// The local forwarder: a request whose session's agent is connected to this node. Its cross-node
// counterpart is the CrossNodeForwarder (cross-node.ts), reached through `Arrival.forward`. Here the
// agent's protection and the session's limits (admission.ts), then the head the backend receives
// (forwarding-headers.ts), then a stream at once or after the bounded wait for a free slot.

/** Starts an arrival on a stream of its session here, or refuses it with what stopped it. */
function forwardHere(
  arrival: Arrival,
  route: IngressRoute,
  connection: TunnelEntry,
  options: TunnelIngressOptions,
): void {
  const prepared = prepare(arrival, route, connection, options);
  if ('refusal' in prepared) {
    arrival.refuse(prepared.refusal);
    return;
  }
  arrival.via = connection;
  acquireStream(connection, route.name, arrival, prepared.payload);
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
  return encodeForwardedHead(arrival, route, connection);
}

/**
 * The head the agent receives, encoded for its session: the forwarded fields, an upgrade's two, and a gRPC
 * call's grpc-timeout stating the time left (written again when a wait for a stream slot made it stale).
 */
export function encodeForwardedHead(
  arrival: Pick<Arrival, 'request' | 'upgrade'>,
  route: IngressRoute,
  connection: TunnelEntry,
): { payload: Buffer } | { refusal: Refusal } {
  const request = arrival.request;
  const headers = forwardedHeaders(request);
  // An upgrade keeps the two fields that ask for it; everything else hop-by-hop is dropped.
  if (arrival.upgrade) headers.push('Connection', 'Upgrade', 'Upgrade', String(request.req.headers.upgrade));
  request.deadline?.passOn(headers);
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
      forwardAcross(arrival, route, options, crossNode, owner);
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

/** The owners a request already tried (they did not answer, or no longer held its session). */
const passedBy = new WeakMap<Arrival, Set<string>>();

/**
 * Carries an arrival to `owner` on another node (or, with none known, to the wait across nodes). A request
 * that can be sent again and whose owner is gone or no longer holds the session comes back through `lost`
 * and waits (bounded) for the registry to name another: a replica set's next holder, or the node its agent
 * reconnected to. Counted against its holder while outstanding, for a replica set's choice.
 */
function forwardAcross(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  crossNode: CrossNodeForwarder,
  owner: OwnerEntry | undefined,
): void {
  let passed = passedBy.get(arrival);
  if (passed === undefined) {
    passed = new Set();
    passedBy.set(arrival, passed);
  }
  const tried = passed;
  const deadline = Date.now() + options.reconnectWaitMs;
  // A waiting request counts as in flight: a draining node must not stop under it.
  const wait = (): void => {
    options.inFlight.start();
    void awaitAcrossNodes(arrival, route, options, crossNode, deadline, tried, lost).finally(() =>
      options.inFlight.finish(),
    );
  };
  const lost = (gone: OwnerEntry): void => {
    tried.add(ownerKey(gone));
    wait();
  };
  if (owner === undefined) wait();
  else forwardTracked(arrival, route, crossNode, owner, lost);
}

function forwardTracked(
  arrival: Arrival,
  route: IngressRoute,
  crossNode: CrossNodeForwarder,
  owner: OwnerEntry,
  lost: (owner: OwnerEntry) => void,
): void {
  // Requests only: an upgrade's socket already carries the hop's pipe listeners, and a WebSocket's choice
  // by the requests outstanding (ties round robin) spreads them as well.
  if (owner.replica === true && !arrival.upgrade) arrival.watch(crossNode.track(route.name, owner.nodeId));
  arrival.forward(owner, crossNode, lost);
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
      finding = await crossNode.find(route.name, passed);
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
        forwardTracked(arrival, route, crossNode, finding.entry, lost);
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
