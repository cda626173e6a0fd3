import type { IncomingMessage } from 'node:http';
import type { AdmissionRequest } from './admission.js';
import { type ClientOrigin, type ClientOriginResolver, normalizeAddress } from './client-address.js';
import type { IngressRoute } from './ingress-route.js';

/**
 * What a public request is, resolved once right after its head is parsed and routed: everything the
 * rest of the path (admission, the local or cross-node forwarder, the forwarding headers) asks of it.
 * Before this value each of them worked the client out again from the message. An ingress builds it
 * after its own parsing (today HTTP/1.1, tunnel-ingress.ts); what follows reads it and nothing else
 * about who the client is.
 */
export interface PublicRequest extends AdmissionRequest {
  /** The message itself: its raw headers and body travel on, as the exchange reads them. */
  readonly req: IncomingMessage;
  /** Which tunnel, and the path its backend sees. */
  readonly route: IngressRoute;
  readonly method: string;
  /**
   * Who the client is, when anyone but the peer can say: another node that vouched for it (a forwarded
   * request, see `vouched`), or a trusted proxy in front. Undefined otherwise: then nothing the client
   * wrote about itself is read, and the peer is the client.
   */
  readonly origin: ClientOrigin | undefined;
  /** True when another node forwarded it and vouched for its client: such a request is never forwarded. */
  readonly vouched: boolean;
  /** What the forwarding headers state about the client, whichever way the request travels on. */
  readonly forwarding: ForwardingFacts;
}

/**
 * What the edge states about a request's client in X-Forwarded-* (forwarding-headers.ts writes them for
 * the backend, and for the node a request is carried to).
 */
export interface ForwardingFacts {
  /** The TCP peer the edge saw. */
  readonly peer: string;
  readonly proto: string;
  readonly host: string;
  /** The path prefix a trusted proxy in front stated, without its trailing `/`; empty otherwise. */
  readonly prefix: string;
}

/**
 * Resolves a routed request once: its client (the node that vouched for it, else a trusted proxy's
 * word, else the peer), its credentials, the body length it declares, and what the forwarding headers
 * will state (decided here so the backend's headers and a node hop's agree, however often it is retried).
 */
export function resolvePublicRequest(
  req: IncomingMessage,
  route: IngressRoute,
  clients: ClientOriginResolver,
  via: ClientOrigin | undefined,
): PublicRequest {
  // Only read when the operator trusts a proxy in front; otherwise nothing the client wrote is looked at.
  const origin = via ?? (clients.trustsAnyone ? clients.resolve(req) : undefined);
  return {
    req,
    route,
    method: req.method ?? 'GET',
    origin,
    vouched: via !== undefined,
    authorization: req.headers.authorization,
    clientAddress: origin?.address ?? normalizeAddress(req.socket.remoteAddress ?? ''),
    declaredLength: Number(req.headers['content-length'] ?? 0),
    forwarding: decideForwarding(req, origin),
  };
}

/** A host[:port] as a Host field may carry it: a DNS name, IPv4 or [IPv6], optional port. */
const validHost =
  /^(?:[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
/** A path prefix: starts with `/`, visible ASCII only. */
const validPrefix = /^\/[\x21-\x7e]*$/;

/** The one value of a single-valued field a trusted proxy set, or undefined when absent or repeated. */
function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value.trim() : undefined;
}

/** What the edge states about a request's client in X-Forwarded-*: its own view, or a trusted proxy's. */
function decideForwarding(req: IncomingMessage, origin: ClientOrigin | undefined): ForwardingFacts {
  const peer = origin?.peer ?? req.socket.remoteAddress ?? '';
  let proto: string = 'encrypted' in req.socket ? 'https' : 'http';
  let host = req.headers.host ?? '';
  let prefix = '';
  if (origin?.trustedPeer === true) {
    const givenProto = single(req.headers['x-forwarded-proto'])?.toLowerCase();
    if (givenProto === 'http' || givenProto === 'https') proto = givenProto;
    const givenHost = single(req.headers['x-forwarded-host']);
    if (givenHost !== undefined && givenHost.length <= 255 && validHost.test(givenHost)) host = givenHost;
    const givenPrefix = single(req.headers['x-forwarded-prefix']);
    if (givenPrefix !== undefined && givenPrefix.length <= 1024 && validPrefix.test(givenPrefix)) {
      prefix = givenPrefix.endsWith('/') ? givenPrefix.slice(0, -1) : givenPrefix;
    }
  }
  return { peer, proto, host, prefix };
}
