import type { ReplicaSetRegistry, SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import type { Cluster } from './cluster/cluster.js';
import { SharedTcpPorts } from './cluster/tcp/shared-tcp-ports.js';
import { replicaSetsOf } from './cluster/timed-registry.js';
import type { InFlight } from './exchange/in-flight.js';
import type { ResolvedEdgeOptions } from './settings/edge-options.js';
import { type TcpPortTable, TcpTunnels } from './tcp/tcp-tunnels.js';

/**
 * The edge's table of public TCP ports, none without a range. In a cluster, ports are claimed in the
 * shared registry and every node listens on the whole range (`shared`, also what the node link hands
 * carried connections to); otherwise this process's own table.
 */
export function edgeTcpPorts(
  options: ResolvedEdgeOptions,
  context: {
    registry: SessionRegistry & Partial<ReplicaSetRegistry>;
    cluster: Cluster | undefined;
    inFlight: InFlight;
    logger: Logger;
  },
): { tcp: TcpPortTable | undefined; shared: SharedTcpPorts | undefined } {
  const { registry, cluster, inFlight, logger } = context;
  if (options.tcpPorts === undefined) return { tcp: undefined, shared: undefined };
  if (cluster === undefined) {
    const tcp = new TcpTunnels({
      range: options.tcpPorts,
      host: options.host,
      maxPortsPerOwner: options.maxTcpPortsPerOwner,
      reconnectGraceMs: options.reconnectGraceMs,
      inFlight,
      logger,
    });
    return { tcp, shared: undefined };
  }
  const shared = new SharedTcpPorts({
    range: options.tcpPorts,
    host: options.host,
    maxPortsPerOwner: options.maxTcpPortsPerOwner,
    reconnectGraceMs: options.reconnectGraceMs,
    leaseTtlMs: options.leaseTtlMs,
    registry,
    replicaSets: replicaSetsOf(registry),
    cluster,
    inFlight,
    reconnectWaitMs: options.reconnectWaitMs,
    maxHeldPerPort: options.maxWaitingPerSession,
    reusePort: options.reusePort,
    logger,
  });
  return { tcp: shared, shared };
}
