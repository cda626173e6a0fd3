import type { ReplicaSetRegistry, SessionRegistry } from '@tunnel2/registry';

/** The registry operations that are timed (every call that may cross the network in Redis mode). */
export const REGISTRY_OPERATIONS = [
  'claim',
  'renew',
  'renewMany',
  'markDisconnected',
  'release',
  'lookup',
  'list',
  'listOwned',
  'announceNode',
  'lookupNode',
  'withdrawNode',
  'ping',
  'claimReplica',
  'renewReplica',
  'releaseReplica',
  'lookupReplicas',
] as const;

export type RegistryOperation = (typeof REGISTRY_OPERATIONS)[number];

/** One finished registry call: how long it took and whether it failed. */
export type RegistryObserver = (operation: RegistryOperation, seconds: number, failed: boolean) => void;

/**
 * Where registry timings go: the edge's metrics subscribe once they exist (they are created after the
 * edge). With nobody subscribed a call costs two clock reads.
 */
export class RegistryTimings {
  readonly #observers = new Set<RegistryObserver>();

  subscribe(observer: RegistryObserver): () => void {
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }

  observe(operation: RegistryOperation, seconds: number, failed: boolean): void {
    for (const observer of this.#observers) observer(operation, seconds, failed);
  }
}

/**
 * The same registry, every operation timed into `timings`. A wrapper and not a change to the registries:
 * both implementations stay unaware of metrics, and the contract suite tests them unwrapped.
 */
export function timedRegistry(
  inner: SessionRegistry & Partial<ReplicaSetRegistry>,
  timings: RegistryTimings,
): SessionRegistry & Partial<ReplicaSetRegistry> {
  const timed = <T>(operation: RegistryOperation, call: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const finish = (failed: boolean): void =>
      timings.observe(operation, (performance.now() - started) / 1_000, failed);
    let pending: Promise<T>;
    try {
      pending = call();
    } catch (err) {
      finish(true);
      return Promise.reject(err);
    }
    return pending.then(
      (value) => {
        finish(false);
        return value;
      },
      (err: unknown) => {
        finish(true);
        throw err;
      },
    );
  };
  const sets = replicaSetsOf(inner);
  return {
    ...(sets === undefined
      ? {}
      : {
          claimReplica: (input) => timed('claimReplica', () => sets.claimReplica(input)),
          renewReplica: (name, nodeId, epoch, ttlMs) =>
            timed('renewReplica', () => sets.renewReplica(name, nodeId, epoch, ttlMs)),
          releaseReplica: (name, nodeId, epoch) =>
            timed('releaseReplica', () => sets.releaseReplica(name, nodeId, epoch)),
          lookupReplicas: (name) => timed('lookupReplicas', () => sets.lookupReplicas(name)),
        }),
    claim: (input) => timed('claim', () => inner.claim(input)),
    renew: (name, epoch, ttlMs) => timed('renew', () => inner.renew(name, epoch, ttlMs)),
    renewMany: (leases, ttlMs) => timed('renewMany', () => inner.renewMany(leases, ttlMs)),
    markDisconnected: (name, epoch, graceMs) =>
      timed('markDisconnected', () => inner.markDisconnected(name, epoch, graceMs)),
    release: (name, epoch) => timed('release', () => inner.release(name, epoch)),
    lookup: (name) => timed('lookup', () => inner.lookup(name)),
    list: () => timed('list', () => inner.list()),
    listOwned: (owner, space) => timed('listOwned', () => inner.listOwned(owner, space)),
    announceNode: (announcement) => timed('announceNode', () => inner.announceNode(announcement)),
    lookupNode: (nodeId) => timed('lookupNode', () => inner.lookupNode(nodeId)),
    withdrawNode: (nodeId) => timed('withdrawNode', () => inner.withdrawNode(nodeId)),
    ping: () => timed('ping', () => inner.ping()),
    close: () => inner.close(),
  };
}

/** The registry's replica sets, when it has them (every registry of this repository does; one passed in by an embedder may not). */
export function replicaSetsOf(registry: Partial<ReplicaSetRegistry>): ReplicaSetRegistry | undefined {
  const { claimReplica, renewReplica, releaseReplica, lookupReplicas } = registry;
  if (
    claimReplica === undefined ||
    renewReplica === undefined ||
    releaseReplica === undefined ||
    lookupReplicas === undefined
  )
    return undefined;
  return {
    claimReplica: claimReplica.bind(registry),
    renewReplica: renewReplica.bind(registry),
    releaseReplica: releaseReplica.bind(registry),
    lookupReplicas: lookupReplicas.bind(registry),
  };
}
