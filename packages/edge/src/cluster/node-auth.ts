import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Where a node opens its link to a peer (a WebSocket carrying the multiplexed protocol). */
export const LINK_PATH = '/_tunnel2/node-link';
/** How far a signature's timestamp may be from this node's clock: tolerates skew, bounds replay. */
export const MAX_SKEW_MS = 30_000;

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

/** What a link upgrade's signature came to (see NodeAuth.verifyLink). */
export type LinkSignature =
  | { kind: 'valid'; fromNode: string; nonce: string; expiresAt: number }
  /** Genuine and fresh, but signed for another node id: the sender's registry names a node no longer here. */
  | { kind: 'misdirected'; fromNode: string; toNode: string }
  | { kind: 'old'; fromNode: string };

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
/** A link upgrade (v2: binds the target node and a nonce). */
const LINK_LABEL = 'tunnel2-node-link-v2';
/** The accepting node's answer to a link upgrade. */
const LINK_PROOF_LABEL = 'tunnel2-node-link-proof-v2';
/** A node's record in the registry. */
const RECORD_LABEL = 'tunnel2-node-record-v2';
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
   * The value a node opens a link with (`v2 <from> <to> <timestamp> <nonce> <hmac>`), signed once per link
   * (the requests on the link carry no signature: the link itself is authenticated). It names the node it
   * is for and carries a fresh nonce, so a captured value opens no link at another node, nor a second one
   * at the same node (which remembers the nonces it took for as long as the timestamp is acceptable).
   */
  signLink(fromNode: string, toNode: string, host: string): { value: string; nonce: string } {
    const nonce = randomBytes(16).toString('hex');
    const timestamp = this.#now();
    const hex = mac(this.#secret, LINK_LABEL, timestamp, linkParts(fromNode, toNode, nonce, host));
    return { value: `v2 ${fromNode} ${toNode} ${timestamp} ${nonce} ${hex.toString('hex')}`, nonce };
  }

  /**
   * A link upgrade's signature: `valid` (a holder of the secret signed it for `toNode`, fresh; the caller
   * still checks the nonce was not used before, until `expiresAt`), `misdirected` (as valid, but signed for
   * another node id: the sender still believes a node that was at this address before, e.g. this node's
   * previous process, whose registry entries outlive it for a while), `old` (a valid signature of the v1
   * handshake, which bound neither: a peer from before this version), or undefined. The target is compared
   * only once the MAC verified: a forgery is undefined whatever node it names.
   */
  verifyLink(value: string, host: string, toNode: string): LinkSignature | undefined {
    const split = value.split(' ');
    if (split[0] === 'v1') {
      const old = this.verify(value, linkFields(host));
      return old === undefined ? undefined : { kind: 'old', fromNode: old.fromNode };
    }
    if (split.length !== 6 || split[0] !== 'v2') return undefined;
    const [, fromNode, to, stamp, nonce, hex] = split as [string, string, string, string, string, string];
    if (!/^[0-9a-f]{32}$/.test(nonce)) return undefined;
    const timestamp = this.#fresh(stamp);
    if (timestamp === undefined || !/^[0-9a-f]{64}$/.test(hex)) return undefined;
    const expected = mac(this.#secret, LINK_LABEL, timestamp, linkParts(fromNode, to, nonce, host));
    if (!timingSafeEqual(Buffer.from(hex, 'hex'), expected)) return undefined;
    if (to !== toNode) return { kind: 'misdirected', fromNode, toNode: to };
    return { kind: 'valid', fromNode, nonce, expiresAt: timestamp + MAX_SKEW_MS };
  }

  /**
   * What the accepting node answers a link with (in its HELLO): proof that it holds the secret too, bound
   * to this link's nonce, so a node whose link was led somewhere else (a forged address) talks to no one.
   */
  proveLink(fromNode: string, toNode: string, nonce: string): string {
    return mac(this.#secret, LINK_PROOF_LABEL, 0, [fromNode, toNode, nonce]).toString('hex');
  }

  checkLinkProof(proof: unknown, fromNode: string, toNode: string, nonce: string): boolean {
    if (typeof proof !== 'string' || !/^[0-9a-f]{64}$/.test(proof)) return false;
    return timingSafeEqual(
      Buffer.from(proof, 'hex'),
      Buffer.from(this.proveLink(fromNode, toNode, nonce), 'hex'),
    );
  }

  /**
   * A node's record in the registry, signed by the node (`v2 <signedAt> <ttlMs> <hmac>`): whoever can write
   * the registry without the secret cannot point a node id at another address, and a copied record stops
   * verifying once its announcement would have expired.
   */
  signNodeRecord(nodeId: string, url: string, ttlMs: number): string {
    const timestamp = this.#now();
    const hex = mac(this.#secret, RECORD_LABEL, timestamp, [nodeId, url, String(ttlMs)]);
    return `v2 ${timestamp} ${ttlMs} ${hex.toString('hex')}`;
  }

  verifyNodeRecord(nodeId: string, url: string, signature: string | undefined): boolean {
    const split = signature?.split(' ') ?? [];
    if (split.length !== 4 || split[0] !== 'v2') return false;
    const [, stamp, ttl, hex] = split as [string, string, string, string];
    if (!/^\d{1,16}$/.test(stamp) || !/^\d{1,10}$/.test(ttl) || !/^[0-9a-f]{64}$/.test(hex)) return false;
    const timestamp = Number(stamp);
    const now = this.#now();
    if (timestamp > now + MAX_SKEW_MS || timestamp + Number(ttl) + MAX_SKEW_MS < now) return false;
    const expected = mac(this.#secret, RECORD_LABEL, timestamp, [nodeId, url, ttl]);
    return timingSafeEqual(Buffer.from(hex, 'hex'), expected);
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
    const timestamp = this.#fresh(stamp);
    if (timestamp === undefined || !/^[0-9a-f]{64}$/.test(hex)) return undefined;
    const expected = mac(this.#secret, label, timestamp, parts(fromNode));
    return timingSafeEqual(Buffer.from(hex, 'hex'), expected) ? { fromNode } : undefined;
  }

  /** A timestamp within MAX_SKEW_MS of this node's clock, or undefined. */
  #fresh(stamp: string): number | undefined {
    const timestamp = Number(stamp);
    if (!/^\d{1,16}$/.test(stamp) || Math.abs(this.#now() - timestamp) > MAX_SKEW_MS) return undefined;
    return timestamp;
  }
}

function linkParts(fromNode: string, toNode: string, nonce: string, host: string): string[] {
  return [fromNode, toNode, nonce, 'GET', LINK_PATH, host];
}

/** The v1 link handshake's fields (a signed GET of the link path), still verified to name an old peer. */
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
