import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { rejectUpgrade, sendRefusal } from '../answers/error-response.js';
import { unreachableOwner } from '../answers/refusals.js';
import type { InFlight } from '../exchange/in-flight.js';
import { isIdempotent, requestHasBody } from '../exchange/raw-http.js';
import type { OwnerEntry } from '../public/cross-node.js';
import { hopOrigin } from '../public/forwarding-headers.js';
import type { PublicRequest } from '../public/public-request.js';
import type { Cluster } from './cluster.js';
import { type HopOutcome, isNotHere } from './node-hop.js';

/**
 * What a forwarded request needs of the public ingress: the same values the ingress itself runs with
 * (build-edge.ts hands both the same ones).
 */
export interface ForwardingContext {
  /** Counts requests in flight (for drain and metrics). */
  inFlight: InFlight;
  logger: Logger;
  responseTimeoutMs: number;
  maxRequestBodyBytes: number;
}

type Ingress = Pick<ForwardingContext, 'inFlight' | 'logger'>;

/**
 * Failures that happen before a request leaves this node (the peer's port refused or never accepted the
 * connection): the peer cannot have run it, whatever its method.
 */
const NEVER_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

function neverSent(err: unknown): boolean {
  const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
  return typeof code === 'string' && NEVER_SENT.has(code);
}

/**
 * Carries one public request to the node holding its session and settles what came of it: the owner
 * cache corrected, the counters moved, and (with `lost`) a request that can be sent again handed back to
 * the wait for its agent when the owner is gone or no longer holds the session. A request the owner may
 * already have given to its backend is sent again only when its method is idempotent.
 */
export function forwardRequest(
  request: PublicRequest,
  req: IncomingMessage,
  res: ServerResponse,
  owner: OwnerEntry,
  cluster: Cluster,
  options: Ingress,
  lost?: (owner: OwnerEntry) => void,
): void {
  const { route } = request;
  const name = route.name;
  // The HTTP hop (HTTP/1.1 only, no gRPC call crosses it) carries no deadline: the node it reaches counts
  // one from its own arrival. Held here, so the arrival's timer never answers under the hop's response.
  request.deadline?.hold();
  const headers = cluster.hopHeaders(req, hopOrigin(request));
  // With Expect: 100-continue the owner's backend decides on the body: the hop relays its 100 or its
  // early final answer.
  const hasBody = requestHasBody(req);
  options.inFlight.start();
  const settle = (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }): void => {
    if (outcome === 'moved') {
      cluster.notHere(name, owner);
      if (lost !== undefined && !res.destroyed) lost(owner);
      return;
    }
    if (outcome === 'unreachable') {
      const again = !hasBody && (neverSent(detail.err) || isIdempotent(req.method));
      unreachable(cluster, owner, name, options, detail.err);
      if (res.headersSent || res.destroyed) return;
      // Nothing of a bodyless request was consumed: it waits for the agent to appear on a live node.
      if (lost !== undefined && again) lost(owner);
      else sendRefusal(res, unreachableOwner(name, owner));
      return;
    }
    if (isNotHere(detail.edgeError)) cluster.notHere(name, owner);
    else cluster.counters.forwarded[outcome]++;
  };
  const onDone = (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }): void => {
    try {
      settle(outcome, detail);
    } finally {
      // After `lost` took the request on: the in-flight count never dips to zero in between.
      options.inFlight.finish();
    }
  };
  cluster.hop.forward(owner, req, res, headers, hasBody, onDone, lost !== undefined);
}

/** Relays a public WebSocket upgrade to the node holding its session (a raw pipe once it connects). */
export function forwardUpgrade(
  request: PublicRequest,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  owner: OwnerEntry,
  cluster: Cluster,
  options: Ingress,
): void {
  const name = request.route.name;
  const headers = cluster.hopHeaders(req, hopOrigin(request));
  options.inFlight.start();
  cluster.hop.forwardUpgrade(owner, req, socket, head, headers, {
    failed: (err) => {
      options.inFlight.finish();
      unreachable(cluster, owner, name, options, err);
      rejectUpgrade(socket, unreachableOwner(name, owner));
    },
    // The client left first: nothing is known of the peer, so it is not marked unreachable.
    abandoned: () => options.inFlight.finish(),
    finished: () => {
      cluster.counters.forwarded.ok++;
      options.inFlight.finish();
    },
  });
}

/** The owner node did not answer: marked so (its cache entries and connections go), and logged. */
export function unreachable(
  cluster: Cluster,
  owner: OwnerEntry,
  name: string,
  options: Pick<Ingress, 'logger'>,
  err: unknown,
): void {
  cluster.unreachable(owner);
  options.logger.warn({ err, session: name, node: owner.nodeId }, 'cluster: node unreachable');
}
