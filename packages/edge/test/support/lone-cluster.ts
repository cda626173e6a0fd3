import { WindowBudget } from '@tunnel2/protocol';
import type { SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { Cluster } from '../../src/cluster/cluster.js';

/**
 * A cluster node `node-a` on `registry` that announces nothing and opens no links: what finds owners in the
 * registry, as the edge uses it, without a server around it. The caller closes it.
 */
export function loneCluster(registry: SessionRegistry): Cluster {
  return new Cluster({
    registry,
    nodeId: 'node-a',
    options: {
      nodeUrl: undefined,
      secret: 'x'.repeat(32),
      announceTtlMs: 10_000,
      ownerCacheTtlMs: 1_000,
      ownerCacheSize: 100,
      connectTimeoutMs: 1_000,
      connectionsPerNode: 1,
      nodeLink: false,
    },
    logger: pino({ level: 'silent' }),
    responseTimeoutMs: 1_000,
    protocol: {},
    windowBudget: new WindowBudget(0),
    maxMessageSize: 1 << 20,
  });
}
