import type { Server } from 'node:net';
import type { SessionRecord, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { TcpPort } from '../../agents/tcp-port.js';

/** The registry's key space for ports: `tcp:<port>`, beside the session names (which have no colon). */
export const TCP_SPACE = 'tcp';
export const portKey = (port: number): string => `${TCP_SPACE}:${port}`;

/** A port this node holds in the registry: the epoch of its latest claim, and of the session serving it. */
export class HeldPort extends TcpPort {
  epoch: number;
  /** The claim the serving session attached under: its end marks exactly that claim disconnected. */
  servedEpoch = 0;
  constructor(port: number, owner: string, server: Server, epoch: number, account: string) {
    super(port, owner, server, account);
    this.epoch = epoch;
  }
}

export interface PortLeaseRenewal {
  registry: SessionRegistry;
  nodeId: string;
  leaseTtlMs: number;
  logger: Logger;
  /** Whether `held` is still this node's entry for its port: each registry call awaited may have changed it. */
  current(held: HeldPort): boolean;
  /** The port is another claim's now: the session serving it here stops. */
  lose(held: HeldPort, holder: Pick<SessionRecord, 'owner' | 'nodeId'>): void;
}

/**
 * Renews the leases of the ports `served` here in one registry call. A refused renewal means another claim
 * holds the port now (`lose`), or the lease ran out while the registry was away (claimed again for the same
 * owner). True when a port was claimed again: the registry lost this node's announcement too, so the caller
 * announces now rather than at the next round.
 */
export async function renewPortLeases(
  served: readonly HeldPort[],
  renewal: PortLeaseRenewal,
): Promise<boolean> {
  const { registry, logger, nodeId, leaseTtlMs } = renewal;
  const renewed = await registry.renewMany(
    served.map((held) => ({ name: portKey(held.port), epoch: held.epoch })),
    leaseTtlMs,
  );
  let lost = false;
  for (const [i, held] of served.entries()) {
    if (renewed[i] === true || !renewal.current(held)) continue;
    const record = await registry.lookup(portKey(held.port));
    if (!renewal.current(held)) continue;
    if (record !== undefined) {
      if (record.epoch !== held.epoch || record.nodeId !== nodeId) renewal.lose(held, record);
      continue;
    }
    const claimed = await registry.claim({
      name: portKey(held.port),
      owner: held.owner,
      nodeId,
      ttlMs: leaseTtlMs,
    });
    if (claimed.ok) {
      logger.info(
        { port: held.port, epoch: claimed.record.epoch },
        'TCP: port lease re-asserted after it expired',
      );
      held.epoch = claimed.record.epoch;
      held.servedEpoch = claimed.record.epoch;
      lost = true;
    } else renewal.lose(held, claimed.record);
  }
  return lost;
}
