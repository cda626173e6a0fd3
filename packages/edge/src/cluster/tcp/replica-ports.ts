import type { ReplicaSetRegistry, SessionRecord, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import type { TcpClaim } from '../../agents/port-claims.js';
import { claimPlace, KeptPlaces, type PlaceClaims, tellReplacedPlaces } from '../../agents/replica-place.js';
import { EdgeErrorCode } from '../../errors.js';
import { type HeldPort, portKey, TCP_SPACE } from './port-leases.js';

export interface ReplicaPortsOptions {
  registry: SessionRegistry;
  replicaSets: ReplicaSetRegistry;
  nodeId: string;
  leaseTtlMs: number;
  logger: Logger;
  /** A live exclusive claim of the same owner on another node was taken over: its node is told. */
  onTakeover: (replaced: SessionRecord, claimed: SessionRecord) => void;
}

/** What a replica port's claim needs of this node's table of ports (shared-tcp-ports.ts). */
export interface PortsHere {
  readonly held: ReadonlyMap<number, HeldPort>;
  /** This node listens on the port. */
  readonly listening: boolean;
  readonly maxPortsPerOwner: number;
  closed(): boolean;
  /** Holds the port here for the replica's owner under its place's `epoch`. */
  hold(epoch: number): HeldPort;
}

export interface ReplicaRenewal {
  /** Whether `held` is still this node's entry for its port: each registry call awaited may have changed it. */
  current(held: HeldPort): boolean;
  /** The port is another claim's now: the sessions serving it here stop. */
  lose(held: HeldPort, holder: Pick<SessionRecord, 'owner' | 'nodeId'>): void;
}

/**
 * The registry side of a port served by TCP replicas in a cluster: the port's `tcp:<port>` key is a replica
 * set (the registry's, as a name served by HTTP replicas: one place per holder node, one owner), not one
 * node's exclusive record. This node takes its place when its first replica of the port arrives, renews it
 * with its lease round and leaves it as its last replica goes — kept for the reconnect grace when it is the
 * set's last holder, as a name's place is (replica-place.ts: the same claim and keep logic, not a second one).
 */
export class ReplicaPorts {
  readonly #options: ReplicaPortsOptions;
  readonly #claims: PlaceClaims;
  readonly #kept: KeptPlaces;

  constructor(options: ReplicaPortsOptions) {
    this.#options = options;
    this.#claims = {
      registry: options.registry,
      replicaSets: options.replicaSets,
      nodeId: options.nodeId,
      leaseTtlMs: options.leaseTtlMs,
      onTakeover: options.onTakeover,
    };
    this.#kept = new KeptPlaces(options.replicaSets, options.nodeId, options.logger);
  }

  /** Takes this node's place in the port's set for a replica of `owner`; refused while another owner holds it. */
  async claim(
    port: number,
    owner: string,
    account: string,
  ): Promise<{ ok: true; epoch: number } | { ok: false; record: SessionRecord | undefined }> {
    return claimPlace(this.#claims, { name: portKey(port), owner, account });
  }

  /**
   * A TCP replica's claim of `port`: it joins the owner's replicas served here, or takes this node's place in
   * the port's replica set. Another owner's live port or set refuses it. The account's limit counts its
   * exclusive ports across the cluster and its replica ports on this node (the registry lists exclusive
   * records by account, not replica places).
   */
  async claimPort(
    ask: { owner: string; port: number; account: string; refused: TcpClaim },
    here: PortsHere,
  ): Promise<TcpClaim> {
    const { owner, port, account } = ask;
    const existing = here.held.get(port);
    if (existing?.replica === true && existing.owner === owner && existing.connection !== undefined)
      return { ok: true, port: existing };
    if (!here.listening)
      return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${port} is taken on this edge's host`);
    try {
      const owned = await this.#options.registry.listOwned(account, TCP_SPACE);
      const others = owned.filter((record) => record.name !== portKey(port)).length;
      const replicas = [...here.held.values()].filter(
        (held) => held.replica && held.account === account && held.port !== port,
      ).length;
      if (others + replicas >= here.maxPortsPerOwner) return ask.refused;
      const placed = await this.claim(port, owner, account);
      if (!placed.ok)
        return refuse(EdgeErrorCode.TCP_PORT_UNAVAILABLE, `port ${port} is in use by another agent`);
      if (here.closed()) return refuse(EdgeErrorCode.DRAINING, 'this edge is shutting down');
      return { ok: true, port: here.hold(placed.epoch) };
    } catch (err) {
      this.#options.logger.error({ err }, 'TCP: registry replica claim failed');
      return refuse(
        EdgeErrorCode.REGISTRY_UNAVAILABLE,
        'the session registry is unavailable: new TCP ports cannot be claimed right now, retry shortly',
      );
    }
  }

  /** The owner of the port's live replica set, if any. */
  async owner(port: number): Promise<string | undefined> {
    return (await this.#options.replicaSets.lookupReplicas(portKey(port)))?.owner;
  }

  /** An exclusive claim of the owner took the port: the nodes of its replica places are told. */
  async tellReplaced(claimed: SessionRecord): Promise<void> {
    await tellReplacedPlaces(this.#claims, claimed);
  }

  /** The last replica of the port here is gone: the place goes, or is kept for `graceMs` (KeptPlaces). */
  async leave(held: HeldPort, graceMs: number): Promise<void> {
    await this.#kept.leave(portKey(held.port), held.epoch, graceMs);
  }

  /**
   * A lease round for the replica ports `served` here: each place renewed; one that expired while the
   * registry was away is taken again (a new epoch), one another claim holds now is lost. Then the kept
   * places are checked.
   */
  async renew(served: readonly HeldPort[], renewal: ReplicaRenewal): Promise<void> {
    const { replicaSets, nodeId, leaseTtlMs, logger } = this.#options;
    for (const held of served) {
      const name = portKey(held.port);
      if (await replicaSets.renewReplica(name, nodeId, held.epoch, leaseTtlMs)) continue;
      // A live record (the owner's newer exclusive claim, or another owner's) has the port: as for an
      // exclusive lease (renewPortLeases), only a port held by nobody is taken again.
      const record = await this.#options.registry.lookup(name);
      if (!renewal.current(held)) continue;
      if (record !== undefined) {
        renewal.lose(held, record);
        continue;
      }
      const again = await this.claim(held.port, held.owner, held.account);
      if (!renewal.current(held)) continue;
      if (again.ok) {
        logger.info(
          { port: held.port, epoch: again.epoch },
          'TCP: replica place re-asserted after it expired',
        );
        held.epoch = again.epoch;
        held.servedEpoch = again.epoch;
      } else renewal.lose(held, { owner: again.record?.owner ?? '', nodeId: again.record?.nodeId ?? '' });
    }
    await this.#kept.round();
  }
}

function refuse(code: EdgeErrorCode, message: string): TcpClaim {
  return { ok: false, code, message };
}
