import { type RawHeaders, withoutHopByHop } from '@tunnel2/protocol';
import {
  LINK_CLIENT_HEADER,
  LINK_SESSION_HEADER,
  NODE_AUTH_HEADER,
  NODE_CLIENT_HEADER,
  NODE_PEER_HEADER,
} from './cross-node.js';
import type { PublicRequest } from './public-request.js';

// The six fields a client could use to lie about where a request came from, and the five one node states to
// another. Length first: most header names are not 9, 15-19, 21 or 22 characters long, and skip the lowercase copy.
const forwardingFields: ReadonlySet<string> = new Set([
  'forwarded',
  'x-real-ip',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-prefix',
  // What one edge node vouches for to another: never passed on, and believed only when signed.
  NODE_AUTH_HEADER,
  NODE_PEER_HEADER,
  NODE_CLIENT_HEADER,
  // What an ingress node states on a link stream (believed because the link is authenticated).
  LINK_SESSION_HEADER,
  LINK_CLIENT_HEADER,
]);

export function isForwardingField(name: string): boolean {
  const n = name.length;
  return (
    (n === 9 || (n >= 15 && n <= 19) || n === 21 || n === 22) && forwardingFields.has(name.toLowerCase())
  );
}

/** What the first node decided about a client, carried to the serving node under the signature (cluster.ts). */
export interface HopOrigin {
  peer: string;
  client: string;
  chain: string | undefined;
  proto: string;
  host: string;
  prefix: string;
}

/** What the head a node forwards another is written from (an HTTP/1.1 message, or an RFC 8441 stream's). */
export type HopRequest = Pick<PublicRequest['req'], 'rawHeaders' | 'headers' | 'method' | 'url'>;

/** What this node decided about a client, for the node it forwards the request to. */
export function hopOrigin(request: PublicRequest): HopOrigin {
  return {
    peer: request.peer,
    proto: request.forwardedProto,
    host: request.forwardedHost,
    prefix: request.forwardedPrefix,
    client: request.clientAddress,
    chain: request.origin?.chain,
  };
}

/**
 * The request's headers as the backend receives them: hop-by-hop fields dropped, every forwarding field
 * the client sent removed, and the edge's own set. From a trusted proxy (`origin.trustedPeer`), its
 * X-Forwarded-For chain is kept with the proxy appended, and its X-Forwarded-Proto / -Host / -Prefix are
 * taken when valid. Forwarded and X-Real-IP never pass: the edge states the same in X-Forwarded-*.
 */
export function forwardedHeaders(request: PublicRequest): RawHeaders {
  const { req, route, origin } = request;
  const headers = withoutHopByHop(req.rawHeaders);
  let write = 0;
  for (let read = 0; read < headers.length; read += 2) {
    if (isForwardingField(headers[read]!)) continue;
    headers[write] = headers[read]!;
    headers[write + 1] = headers[read + 1]!;
    write += 2;
  }
  headers.length = write;
  const { peer } = request;
  let prefix = request.forwardedPrefix;
  headers.push('X-Forwarded-For', origin?.chain === undefined ? peer : `${origin.chain}, ${peer}`);
  headers.push('X-Forwarded-Proto', request.forwardedProto);
  headers.push('X-Forwarded-Host', request.forwardedHost);
  if (route.via === 'path') prefix += `/session/${route.name}`;
  if (prefix !== '') headers.push('X-Forwarded-Prefix', prefix);
  return headers;
}
