import { Gauge, type Registry } from 'prom-client';
import type { TcpPortTable } from '../tcp/tcp-tunnels.js';
import { countFrom } from './scrape-counter.js';

/** The metrics of TCP tunnels: read from the port table's counters at scrape time, nothing per connection here. */
export function collectTcpMetrics(registry: Registry, tcp: TcpPortTable): void {
  countFrom(
    registry,
    'tunnel2_tcp_connections_total',
    'Public connections to TCP tunnel ports by outcome: accepted (carried to the agent), forbidden (allow-list), no_agent (no session serves the port), refused (the session took no stream), forwarded (cluster: carried to the node holding the port, which counts the outcome)',
    'outcome',
    () => tcp.counters.connections,
  );
  countFrom(
    registry,
    'tunnel2_tcp_bytes_total',
    'Bytes carried by finished TCP tunnel connections: direction="in" (client to agent) or "out" (agent to client)',
    'direction',
    () => tcp.counters.bytes,
  );
  new Gauge({
    name: 'tunnel2_tcp_ports_held',
    help: 'Public TCP ports this node holds for an agent token (serving a session, or reserved for its reconnect)',
    registers: [registry],
    collect() {
      this.set(tcp.size);
    },
  });
  new Gauge({
    name: 'tunnel2_tcp_connections_open',
    help: 'Public connections to TCP tunnel ports being carried now',
    registers: [registry],
    collect() {
      this.set(tcp.counters.open);
    },
  });
  new Gauge({
    name: 'tunnel2_tcp_connections_held',
    help: 'Cluster: public connections to TCP tunnel ports held (nothing sent on) until their agent is served again (its node drains, or it reconnects)',
    registers: [registry],
    collect() {
      this.set(tcp.counters.held);
    },
  });
}
