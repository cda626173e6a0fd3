import { ANY_TCP_PORT } from '@tunnel2/protocol';
import type { EdgeErrorCode } from '../errors.js';
import type { TcpPort } from './tcp-port.js';
import type { TunnelEntry } from './tunnel-entry.js';

/** The refusal of a TCP port ask that is neither `any` nor a port number (URL parameter or HELLO metadata). */
export const TCP_ASK_PROBLEM = `tcp must be "${ANY_TCP_PORT}" or a port number`;

export type TcpClaim = { ok: true; port: TcpPort } | { ok: false; code: EdgeErrorCode; message: string };

/**
 * What an agent's session needs of the table of public TCP ports: claiming a port, giving it back, and
 * saying which session serves it. Declared here so this folder imports nothing of `../tcp/`; one node's
 * table (`../tcp/tcp-tunnels.ts`) and a cluster's (`../cluster/tcp/shared-tcp-ports.ts`) implement it.
 */
export interface PortClaims {
  /**
   * Claims `requested` (or any free port) for `owner`. `address`: an anonymous agent's client address, which
   * its ports count against instead of its owner key. An account at its limit gives back its oldest port in
   * the reconnect grace to make room; with none in grace, the claim is refused (TOO_MANY_TCP_PORTS).
   * `replica`: a TCP replica's claim of a named port (`tcp --replica`); in a cluster it takes this node's
   * place in the port's replica set, on one node the replica joins the port when it attaches.
   */
  claim(owner: string, requested: number | undefined, address?: string, replica?: boolean): Promise<TcpClaim>;
  abandon(port: TcpPort): void;
  attach(port: TcpPort, connection: TunnelEntry): void;
  detach(port: TcpPort, connection: TunnelEntry): void;
}
