import { isGrpcContentType } from '@tunnel2/protocol';
import { type ClientOrigin, type ClientOriginResolver, normalizeAddress } from '../access/client-address.js';
import type { PublicMessage } from '../exchange/public-message.js';
import type { AdmissionRequest } from './admission.js';
import { type CallDeadline, callDeadline } from './call-deadline.js';
import type { IngressRoute } from './ingress-route.js';

/**
 * What a public request is, resolved once right after its head is parsed and routed: everything the
 * rest of the path (admission, the local or cross-node forwarder, the forwarding headers) asks of it.
 * Before this value each of them worked the client out again from the message. An ingress builds it
 * after its own parsing (today HTTP/1.1, tunnel-ingress.ts); what follows reads it and nothing else
 * about who the client is.
 */
export interface PublicRequest extends AdmissionRequest, ForwardingFacts {
  /** The message itself: its raw headers and body travel on, as the exchange reads them. */
  readonly req: PublicMessage;
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
  /** A gRPC call's deadline (its grpc-timeout), counted from now: its arrival. Undefined for the rest. */
  readonly deadline: CallDeadline | undefined;
}

/**
 * What the edge states about a request's client in X-Forwarded-* (forwarding-headers.ts writes them for
 * the backend, and for the node a request is carried to).
 */
export interface ForwardingFacts {
  /** The TCP peer the edge saw (appended to X-Forwarded-For). */
  readonly peer: string;
  readonly forwardedProto: string;
  readonly forwardedHost: string;
  /** The path prefix a trusted proxy in front stated, without its trailing `/`; empty otherwise. */
  readonly forwardedPrefix: string;
}

/**
 * Resolves a routed request once: its client (the node that vouched for it, else a trusted proxy's
 * word, else the peer), its credentials, the body length it declares, and what the forwarding headers
 * will state (decided here so the backend's headers and a node hop's agree, however often it is retried).
 */
export function resolvePublicRequest(
  req: PublicMessage,
  route: IngressRoute,
  clients: ClientOriginResolver,
  via: ClientOrigin | undefined,
): PublicRequest {
  // Only read when the operator trusts a proxy in front; otherwise nothing the client wrote is looked at.
  const origin = via ?? (clients.trustsAnyone ? clients.resolve(req) : undefined);
  const grpc = isGrpcContentType(req.headers['content-type']);
  return {
    req,
    route,
    method: req.method ?? 'GET',
    origin,
    vouched: via !== undefined,
    authorization: req.headers.authorization,
    clientAddress: origin?.address ?? normalizeAddress(req.socket.remoteAddress ?? ''),
    declaredLength: Number(req.headers['content-length'] ?? 0),
    grpc,
    deadline: grpc ? callDeadline(req.headers['grpc-timeout']) : undefined,
    peer: origin?.peer ?? req.socket.remoteAddress ?? '',
    forwardedProto: forwardedProto(req, origin),
    forwardedHost: forwardedHost(req, origin),
    forwardedPrefix: forwardedPrefix(req, origin),
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

// What the edge states in X-Forwarded-Proto / -Host / -Prefix: its own view, or a trusted proxy's when
// valid. Three strings rather than an object: the request value holds them without another allocation.

function forwardedProto(req: PublicMessage, origin: ClientOrigin | undefined): string {
  const own = 'encrypted' in req.socket ? 'https' : 'http';
  if (origin?.trustedPeer !== true) return own;
  const given = single(req.headers['x-forwarded-proto'])?.toLowerCase();
  return given === 'http' || given === 'https' ? given : own;
}

function forwardedHost(req: PublicMessage, origin: ClientOrigin | undefined): string {
  const own = req.headers.host ?? '';
  if (origin?.trustedPeer !== true) return own;
  const given = single(req.headers['x-forwarded-host']);
  return given !== undefined && given.length <= 255 && validHost.test(given) ? given : own;
}

function forwardedPrefix(req: PublicMessage, origin: ClientOrigin | undefined): string {
  if (origin?.trustedPeer !== true) return '';
  const given = single(req.headers['x-forwarded-prefix']);
  if (given === undefined || given.length > 1024 || !validPrefix.test(given)) return '';
  return given.endsWith('/') ? given.slice(0, -1) : given;
}
