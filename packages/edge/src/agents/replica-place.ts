import type { ReplicaSetRegistry } from '@tunnel2/registry';

/**
 * Cluster mode: this node leaves its place in the replica set of `name` as its last replica there goes.
 * Where it is the set's last live holder and the agent did not say it was leaving (`graceMs` > 0: its
 * WebSocket dropped, it will reconnect), the place is kept, not renewed, for the reconnect grace: the
 * reservation one edge keeps for a name's last agent, so that no other owner takes the name in a network
 * blip. Beside other live holders the name stays the owner's anyway: the place goes at once, and no node
 * chooses this one any more.
 */
export async function leavePlace(
  sets: ReplicaSetRegistry,
  place: { name: string; nodeId: string; epoch: number },
  graceMs: number,
): Promise<void> {
  const { name, nodeId, epoch } = place;
  if (graceMs > 0) {
    const set = await sets.lookupReplicas(name);
    const last = set?.holders.every((holder) => holder.nodeId === nodeId) === true;
    if (last && (await sets.renewReplica(name, nodeId, epoch, graceMs))) return;
  }
  await sets.releaseReplica(name, nodeId, epoch);
}
