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
  /** Served by replicas of its owner: the claim is this node's place in the port's replica set (replica-ports.ts). */
  replica = false;
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

/** What giving back an account's oldest ports in their grace needs (makeRoom). */
export interface Room {
  registry: SessionRegistry;
  logger: Logger;
  maxPortsPerOwner: number;
  /** The registry gave `port` back (its claim `epoch`): this node forgets it if it keeps it in a grace. */
  givenBack(port: number, epoch: number): void;
}

/**
 * Room for one more port of the account whose ports are `owned`: true at once below the limit; at it, its
 * oldest ports in their grace (reservations, on any node) are given back, as on one node (tcp-tunnels.ts);
 * false when all of them are in use. A node still keeping a given-back port in its grace serves nothing on
 * it (no session) and forgets it when that grace ends; the registry, not it, says who holds the port.
 * The port asked for is never given back for its own claim: it is another owner's reservation (the same
 * address, another agent key), which that claim must not take, as on one node.
 */
export async function makeRoom(
  owned: readonly SessionRecord[],
  requested: number | undefined,
  room: Room,
): Promise<boolean> {
  const excess = owned.length - room.maxPortsPerOwner + 1;
  if (excess <= 0) return true;
  const inGrace = owned
    .filter((record) => !record.connected && (requested === undefined || record.name !== portKey(requested)))
    .sort((a, b) => a.expiresAt - b.expiresAt);
  if (inGrace.length < excess) return false;
  for (const record of inGrace.slice(0, excess)) {
    const port = Number(record.name.slice(TCP_SPACE.length + 1));
    room.logger.info({ port }, 'TCP: oldest port in its grace given back for a new claim');
    await room.registry.release(record.name, record.epoch);
    room.givenBack(port, record.epoch);
  }
  return true;
}

/** The requested port, or every port of the range from a random start (a freed port is not reused first). */
export function* candidatePorts(
  range: { first: number; last: number },
  held: ReadonlyMap<number, HeldPort>,
  requested: number | undefined,
): Generator<number> {
  if (requested !== undefined) {
    yield requested;
    return;
  }
  const { first, last } = range;
  const size = last - first + 1;
  const start = Math.floor(Math.random() * size);
  for (let i = 0; i < size; i++) {
    const candidate = first + ((start + i) % size);
    if (!held.has(candidate)) yield candidate;
  }
  // Then those this node keeps in a grace, no session on them: the registry may have given them back
  // since (another node made room for their owner, `makeRoom`), and it alone says whether they are free.
  for (let i = 0; i < size; i++) {
    const candidate = first + ((start + i) % size);
    const port = held.get(candidate);
    if (port !== undefined && port.connection === undefined) yield candidate;
  }
}
