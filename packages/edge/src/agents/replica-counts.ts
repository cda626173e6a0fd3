import type { ReplicaSetRegistry } from '@tunnel2/registry';
import type { TunnelEntry } from './tunnel-entry.js';

/**
 * How many agents serve a replicated name, as its agents are told (a NOTICE each time it changes:
 * AgentConnection.tellReplicas): its replicas on this node not leaving, plus (cluster mode) one per other
 * node holding a place in its set as last read (the registry keeps places, not agents). Read when this
 * node's first replica of the name arrives and at each lease round.
 */
export class ReplicaCounts {
  /** Other nodes holding a place in a replicated name's set, as last read (names served here only). */
  readonly #otherHolders = new Map<string, number>();
  readonly #nodeId: string;

  constructor(nodeId: string) {
    this.#nodeId = nodeId;
  }

  /** Tells the agents of `entries` (one name's, on this node) how many serve it. */
  tell(name: string, entries: readonly TunnelEntry[]): void {
    // A TCP replica's fellows share its port, not its name: their count is the port's (TcpPort.tellReplicas).
    if (entries.length === 0 || !entries[0]?.replica || entries[0].tcpPort !== undefined) return;
    let count = this.#otherHolders.get(name) ?? 0;
    for (const entry of entries) if (!entry.leaving && !entry.session.draining) count++;
    for (const entry of entries) entry.connection.tellReplicas?.(Math.max(1, count));
  }

  /** Reads the other nodes' places in the set of `name`, then tells the agents the count (`entries()`, after). */
  async read(sets: ReplicaSetRegistry, name: string, entries: () => readonly TunnelEntry[]): Promise<void> {
    const set = await sets.lookupReplicas(name);
    const others = set?.holders.filter((holder) => holder.nodeId !== this.#nodeId).length ?? 0;
    const now = entries();
    if (now.length === 0) return; // gone meanwhile: nothing to remember
    this.#otherHolders.set(name, others);
    this.tell(name, now);
  }

  /** The name has no replica here any more. */
  forget(name: string): void {
    this.#otherHolders.delete(name);
  }
}
