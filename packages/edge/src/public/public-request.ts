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
}

/**
 * Resolves a routed request once: its client (the node that vouched for it, else a trusted proxy's
 * word, else the peer), its credentials and the body length it declares.
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
  };
}
