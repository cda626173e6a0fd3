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

/** Each kind of signed request has its own label, so a signature of one kind never verifies as another. */
function mac(secret: string, label: string, timestamp: number, parts: readonly string[]): Buffer {
  return createHmac('sha256', secret)
    .update([label, timestamp, ...parts].join('\n'))
    .digest();
}

function hopParts(fields: SignedFields): string[] {
  return [
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
  ];
}

const HOP_LABEL = 'tunnel2-node-auth-v1';
/** A node's notice to another (not a forwarded request): covers the sender, the method and the target. */
const NOTICE_LABEL = 'tunnel2-node-notice-v1';

/**
 * Signs and verifies node-to-node requests with the cluster secret. The value is
 * `v1 <fromNode> <timestamp ms> <hmac hex>`; the HMAC covers the request line, the Host and every
 * forwarding field the serving node will believe, so none can be changed or added on the way. Node ids
 * never contain a space (they come from the registry, which validates them as names). Notices (one node
 * telling another something, e.g. a takeover) carry the same header with a signature under another label.
 */
export class NodeAuth {
  readonly #secret: string;
  readonly #now: () => number;

  constructor(secret: string, now: () => number = Date.now) {
    this.#secret = secret;
    this.#now = now;
  }

  sign(fields: SignedFields): string {
    return this.#sign(HOP_LABEL, fields.fromNode, hopParts(fields));
  }

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

  /**
   * The sending node, only for a well-formed, fresh signature over exactly these fields by a holder of the
   * secret (compared in constant time); `fromNode` is taken from the value itself.
   */
  verify(value: string, fields: Omit<SignedFields, 'fromNode'>): { fromNode: string } | undefined {
    return this.#verify(HOP_LABEL, value, (fromNode) => hopParts({ ...fields, fromNode }));
  }

  /** Signs a notice: the request line only (its payload travels in the target's query). */
  signNotice(fromNode: string, method: string, target: string): string {
    return this.#sign(NOTICE_LABEL, fromNode, [fromNode, method, target]);
  }

  verifyNotice(value: string, method: string, target: string): { fromNode: string } | undefined {
    return this.#verify(NOTICE_LABEL, value, (fromNode) => [fromNode, method, target]);
  }

  #sign(label: string, fromNode: string, parts: readonly string[]): string {
    const timestamp = this.#now();
    return `v1 ${fromNode} ${timestamp} ${mac(this.#secret, label, timestamp, parts).toString('hex')}`;
  }

  #verify(
    label: string,
    value: string,
    parts: (fromNode: string) => readonly string[],
  ): { fromNode: string } | undefined {
    const split = value.split(' ');
    if (split.length !== 4 || split[0] !== 'v1') return undefined;
    const [, fromNode, stamp, hex] = split as [string, string, string, string];
    const timestamp = Number(stamp);
    if (!/^\d{1,16}$/.test(stamp) || Math.abs(this.#now() - timestamp) > MAX_SKEW_MS) return undefined;
    if (!/^[0-9a-f]{64}$/.test(hex)) return undefined;
    const expected = mac(this.#secret, label, timestamp, parts(fromNode));
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
