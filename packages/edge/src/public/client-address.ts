import { BlockList, isIP } from 'node:net';
import type { PublicMessage } from '../exchange/public-message.js';

/** `::ffff:127.0.0.1` is an IPv4 client on a dual-stack socket. */
export function normalizeAddress(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * Compiles addresses and CIDR blocks (`10.0.0.0/8`, `::1`, `192.0.2.7`) into a BlockList, or says which
 * entry is not one. Shared by the agent's --allow-ip and the operator's trustProxy.
 */
export function compileAddressBlocks(entries: readonly unknown[]): BlockList | { invalid: string } {
  const blocks = new BlockList();
  for (const entry of entries) {
    const [address, prefix, extra] = String(entry).split('/');
    const family = isIP(address ?? '');
    const bits = prefix === undefined ? (family === 6 ? 128 : 32) : Number(prefix);
    if (
      family === 0 ||
      extra !== undefined ||
      prefix === '' ||
      !Number.isInteger(bits) ||
      bits < 0 ||
      bits > (family === 6 ? 128 : 32)
    ) {
      return { invalid: String(entry) };
    }
    blocks.addSubnet(address!, bits, family === 6 ? 'ipv6' : 'ipv4');
  }
  return blocks;
}

export function inBlocks(blocks: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && blocks.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/**
 * Who a request comes from, as the edge decides it once per request: the connection's peer, or — when
 * that peer is a trusted proxy — what the proxy says in `X-Forwarded-For`.
 */
export interface ClientOrigin {
  /** The peer of the TCP connection (normalized). */
  readonly peer: string;
  /** True when the peer is one of the operator's trusted proxies. */
  readonly trustedPeer: boolean;
  /**
   * The client's address: the peer, or from a trusted peer the right-most address of its
   * X-Forwarded-For chain that is not itself a trusted proxy (nginx's real_ip_recursive, Envoy's
   * xff_num_trusted_hops). An entry that is not an address ends the walk and is returned as is: it
   * matches no allow-list.
   */
  readonly address: string;
  /** From a trusted peer, its X-Forwarded-For chain (all its fields joined); otherwise undefined. */
  readonly chain: string | undefined;
}

/**
 * Resolves client origins against the operator's trusted proxies. Without any, the peer is the client
 * and nothing the client wrote is read.
 */
export class ClientOriginResolver {
  readonly #trusted: BlockList | undefined;

  constructor(trusted: BlockList | undefined) {
    this.#trusted = trusted;
  }

  get trustsAnyone(): boolean {
    return this.#trusted !== undefined;
  }

  /** True when `address` (as the socket reports it) is a trusted proxy. */
  trusts(address: string): boolean {
    return this.#trusted !== undefined && inBlocks(this.#trusted, normalizeAddress(address));
  }

  resolve(req: PublicMessage): ClientOrigin {
    const peer = normalizeAddress(req.socket.remoteAddress ?? '');
    const trusted = this.#trusted;
    if (trusted === undefined || !inBlocks(trusted, peer)) {
      return { peer, trustedPeer: false, address: peer, chain: undefined };
    }
    // Several X-Forwarded-For fields form one list, in order (RFC 9110 §5.3); Node joins them with ", ".
    const given = req.headers['x-forwarded-for'];
    const chain = typeof given === 'string' && given.trim() !== '' ? given : undefined;
    let address = peer;
    if (chain !== undefined) {
      const hops = chain.split(',');
      for (let i = hops.length - 1; i >= 0; i--) {
        const hop = normalizeAddress(hops[i]!.trim());
        address = hop;
        if (!inBlocks(trusted, hop)) break;
      }
    }
    return { peer, trustedPeer: true, address, chain };
  }
}
