import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header a node signs a forwarded request with. */
export const NODE_AUTH_HEADER = 'x-tunnel2-node-auth';
/** The client's TCP peer as the first node saw it (appended to X-Forwarded-For by the serving node). */
export const NODE_PEER_HEADER = 'x-tunnel2-node-peer';
/** The client address the first node decided on (what allow-lists are checked against). */
export const NODE_CLIENT_HEADER = 'x-tunnel2-node-client';

/** Where a node opens its link to a peer (a WebSocket carrying the multiplexed protocol). */
export const LINK_PATH = '/_tunnel2/node-link';
/** On a link stream's request head: the session the request is for (the ingress routed it). */
export const LINK_SESSION_HEADER = 'x-tunnel2-link-session';
/** On a link stream's request head: the client address the ingress decided on (for allow-lists). */
export const LINK_CLIENT_HEADER = 'x-tunnel2-link-client';

/** How far a signature's timestamp may be from this node's clock: tolerates skew, bounds replay. */
const MAX_SKEW_MS = 30_000;

/** What a signature covers: everything the serving node believes because a node said it. */
export interface SignedFields {
  fromNode: string;
  method: string;
  target: string;
  host: string;
  peer: string;
  client: string;
  forwardedFor: string;
  proto: string;
  forwardedHost: string;
  prefix: string;
}

function mac(secret: string, timestamp: number, fields: SignedFields): Buffer {
  return createHmac('sha256', secret)
    .update(
      [
        'tunnel2-node-auth-v1',
        timestamp,
        fields.fromNode,
        fields.method,
        fields.target,
        fields.host,
        fields.peer,
        fields.client,
        fields.forwardedFor,
        fields.proto,
        fields.forwardedHost,
        fields.prefix,
      ].join('\n'),
    )
    .digest();
}

/**
 * Signs and verifies node-to-node requests with the cluster secret. The value is
 * `v1 <fromNode> <timestamp ms> <hmac hex>`; the HMAC covers the request line, the Host and every
 * forwarding field the serving node will believe, so none can be changed or added on the way. Node ids
 * never contain a space (they come from the registry, which validates them as names).
 */
export class NodeAuth {
  readonly #secret: string;
  readonly #now: () => number;

  constructor(secret: string, now: () => number = Date.now) {
    this.#secret = secret;
    this.#now = now;
  }

  sign(fields: SignedFields): string {
    const timestamp = this.#now();
    return `v1 ${fields.fromNode} ${timestamp} ${mac(this.#secret, timestamp, fields).toString('hex')}`;
  }

  /**
   * True only for a well-formed, fresh signature over exactly these fields by a holder of the secret;
   * compared in constant time. `fields.fromNode` is taken from the value itself.
   */
  /**
   * The value a node opens a link with: the upgrade request's line and Host, signed once per link (the
   * requests on the link carry no signature: the link itself is authenticated).
   */
  signLink(fromNode: string, host: string): string {
    return this.sign({ ...linkFields(host), fromNode });
  }

  verifyLink(value: string, host: string): { fromNode: string } | undefined {
    return this.verify(value, linkFields(host));
  }

  verify(value: string, fields: Omit<SignedFields, 'fromNode'>): { fromNode: string } | undefined {
    const parts = value.split(' ');
    if (parts.length !== 4 || parts[0] !== 'v1') return undefined;
    const [, fromNode, stamp, hex] = parts as [string, string, string, string];
    const timestamp = Number(stamp);
    if (!/^\d{1,16}$/.test(stamp) || Math.abs(this.#now() - timestamp) > MAX_SKEW_MS) return undefined;
    if (!/^[0-9a-f]{64}$/.test(hex)) return undefined;
    const expected = mac(this.#secret, timestamp, { ...fields, fromNode });
    return timingSafeEqual(Buffer.from(hex, 'hex'), expected) ? { fromNode } : undefined;
  }
}

function linkFields(host: string): Omit<SignedFields, 'fromNode'> {
  return {
    method: 'GET',
    target: LINK_PATH,
    host,
    peer: '',
    client: '',
    forwardedFor: '',
    proto: '',
    forwardedHost: '',
    prefix: '',
  };
}
