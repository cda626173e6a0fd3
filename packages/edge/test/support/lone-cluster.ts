import { WindowBudget } from '@tunnel2/protocol';
import type { NodeAnnouncement, SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { Cluster } from '../../src/cluster/cluster.js';
import { NodeAuth } from '../../src/cluster/node-auth.js';

/** The cluster secret of `loneCluster`. */
export const LONE_SECRET = 'x'.repeat(32);

/** A peer's announcement as that peer makes it: signed with the cluster's secret (else it is ignored). */
export function signedAnnouncement(nodeId: string, url: string, ttlMs: number): NodeAnnouncement {
  return { nodeId, url, ttlMs, signature: new NodeAuth(LONE_SECRET).signNodeRecord(nodeId, url, ttlMs) };
}

/**
 * A cluster node `node-a` on `registry` that announces nothing and opens no links: what finds owners in the
 * registry, as the edge uses it, without a server around it. The caller closes it.
 */
export function loneCluster(registry: SessionRegistry, unsignedNodeRecords = false): Cluster {
  return new Cluster({
    registry,
    nodeId: 'node-a',
    options: {
      nodeUrl: undefined,
      secret: LONE_SECRET,
      announceTtlMs: 10_000,
      ownerCacheTtlMs: 1_000,
      ownerCacheSize: 100,
      connectTimeoutMs: 1_000,
      connectionsPerNode: 1,
      nodeLink: false,
      unsignedNodeRecords,
    },
    logger: pino({ level: 'silent' }),
    responseTimeoutMs: 1_000,
    protocol: {},
    windowBudget: new WindowBudget(0),
    maxMessageSize: 1 << 20,
  });
}
