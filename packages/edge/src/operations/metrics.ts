import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { MuxSession, WindowBudget } from '@tunnel2/protocol';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SessionTable } from '../agents/session-table.js';
import { type RefusalMessage, refusalChannel } from '../answers/refusal-channel.js';
import type { Cluster } from '../cluster/cluster.js';
import { REGISTRY_OPERATIONS, type RegistryTimings } from '../cluster/timed-registry.js';
import { EdgeErrorCode } from '../errors.js';
import type { ResolvedEdgeOptions } from '../settings/edge-options.js';
import type { TcpPortTable } from '../tcp/tcp-tunnels.js';
import { collectProcessMetrics } from './process-metrics.js';
import { RequestTally, requestCounter, TalliedHistogram } from './request-tally.js';
import { countFrom } from './scrape-counter.js';
import { collectTcpMetrics } from './tcp-metrics.js';
import { collectTlsMetrics, type MeteredTls } from './tls-metrics.js';

/** Why the edge answered instead of tunnelling, coarse enough to alert on. */
export type RefusalReason =
  | 'auth'
  | 'limit'
  | 'offline'
  | 'unknown_session'
  | 'timeout'
  | 'draining'
  | 'invalid'
  | 'failed';

// A Record so a new error code cannot be added without deciding what it counts as.
export const refusalReasonByCode: Readonly<Record<EdgeErrorCode, RefusalReason>> = {
  TUNNEL2_ERR_AGENT_TOKEN_MISSING: 'auth',
  TUNNEL2_ERR_AGENT_TOKEN_INVALID: 'auth',
  TUNNEL2_ERR_AGENT_TOKEN_EXPIRED: 'auth',
  TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED: 'auth',
  TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN: 'auth',
  TUNNEL2_ERR_TOO_MANY_SESSIONS: 'limit',
  TUNNEL2_ERR_BODY_TOO_LARGE: 'limit',
  TUNNEL2_ERR_HEADERS_TOO_LARGE: 'limit',
  TUNNEL2_ERR_TUNNEL_BUSY: 'limit',
  TUNNEL2_ERR_RATE_LIMITED: 'limit',
  TUNNEL2_ERR_TUNNEL_OFFLINE: 'offline',
  TUNNEL2_ERR_TUNNEL_PENDING: 'offline',
  TUNNEL2_ERR_UNKNOWN_SESSION: 'unknown_session',
  TUNNEL2_ERR_RESPONSE_TIMEOUT: 'timeout',
  TUNNEL2_ERR_REQUEST_TIMEOUT: 'timeout',
  TUNNEL2_ERR_DRAINING: 'draining',
  TUNNEL2_ERR_BAD_REQUEST: 'invalid',
  TUNNEL2_ERR_INVALID_NAME: 'invalid',
  TUNNEL2_ERR_RESERVED_NAME: 'invalid',
  TUNNEL2_ERR_NAME_IN_USE: 'invalid',
  TUNNEL2_ERR_UPGRADE_UNSUPPORTED: 'invalid',
  TUNNEL2_ERR_METHOD_NOT_ALLOWED: 'invalid',
  TUNNEL2_ERR_HTTP_VERSION: 'invalid',
  TUNNEL2_ERR_STREAM_FAILED: 'failed',
  TUNNEL2_ERR_INVALID_CONFIG: 'failed',
  TUNNEL2_ERR_INVALID_OPTION: 'failed',
  TUNNEL2_ERR_NODE_UNREACHABLE: 'failed',
  TUNNEL2_ERR_NODE_AUTH_INVALID: 'auth',
  TUNNEL2_ERR_NODE_LINK_VERSION: 'invalid',
  TUNNEL2_ERR_NODE_LINK_BUSY: 'limit',
  TUNNEL2_ERR_NODE_LINK_MISDIRECTED: 'offline',
  TUNNEL2_ERR_REGISTRY_UNAVAILABLE: 'failed',
  TUNNEL2_ERR_TCP_DISABLED: 'invalid',
  TUNNEL2_ERR_TCP_PORT_UNAVAILABLE: 'invalid',
  TUNNEL2_ERR_TCP_PORTS_EXHAUSTED: 'limit',
  TUNNEL2_ERR_TOO_MANY_TCP_PORTS: 'limit',
  TUNNEL2_ERR_AGENT_TOO_OLD: 'failed',
};

/** When the edge took a public request, on its response: read once, as the response closes. */
const startedAt = Symbol('tunnel2.metrics.startedAt');
type TimedResponse = ServerResponse & { [startedAt]?: number };

export interface EdgeMetrics {
  readonly registry: Registry;
  /** Prometheus text exposition of every metric. */
  render(): Promise<{ contentType: string; body: string }>;
  /** `tunnel2_http_requests_total` as numbers by class (`2xx`…, `aborted`): for the log line of a stop. */
  requestTotals(): Promise<Record<string, number>>;
  /** Stops observing the edge (listeners, channel subscription). */
  close(): void;
}

interface ByteTotals {
  received: number;
  sent: number;
}

/**
 * What the metrics read of an edge; `build-edge.ts`'s `Edge` is one. Declared here so that this folder imports
 * nothing above it: the assembly imports operations/, not the reverse.
 */
export interface MeteredEdge {
  readonly app: { readonly server: Server };
  readonly options: Pick<ResolvedEdgeOptions, 'agentPath'>;
  readonly sessions: SessionTable;
  readonly inFlight: number;
  readonly windowBudget: Pick<WindowBudget, 'used'>;
  /** Public connections closed at accept, by reason (`listeners/public-connections.ts`). */
  readonly publicConnections: { readonly dropped: Readonly<Record<'open_files' | 'per_address', number>> };
  /** TLS on the public port: its certificate reloads by result, their expiry; undefined for a plain port. */
  readonly tls: MeteredTls | undefined;
  /** HTTP/2 connections, announced apart from the HTTP/1.1 server's ('connection', with the socket). */
  readonly http2Connections?: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
  readonly tcp: TcpPortTable | undefined;
  readonly cluster: Cluster | undefined;
  readonly registryTimings: RegistryTimings;
}

/**
 * Prometheus metrics of one edge. Nothing here runs per frame: per-request work is one 'close' listener and
 * a pre-bound counter child; sessions, streams, frames, bytes and buffered bytes are read from the objects
 * that already count them when Prometheus scrapes.
 */
export function createEdgeMetrics(edge: MeteredEdge, version: string): EdgeMetrics {
  const registry = new Registry();
  collectProcessMetrics(registry);
  const server = edge.app.server;
  const agentPath = edge.options.agentPath;

  // Sockets of this edge: byte counts are read live and folded into totals when a socket closes.
  const live = new Set<Socket>();
  const agentSockets = new WeakSet<Socket>();
  const closedBytes: Record<'public' | 'agent', ByteTotals> = {
    public: { received: 0, sent: 0 },
    agent: { received: 0, sent: 0 },
  };
  // Frame counters of sessions, sampled: a session's last sample is kept until it is folded in.
  const frameSamples = new Map<MuxSession, { received: number; sent: number }>();
  const frameTotals = { received: 0, sent: 0 };
  const sampleFrames = (): void => {
    const seen = new Set<MuxSession>();
    for (const connection of edge.sessions.connections()) {
      const session = connection.session;
      seen.add(session);
      const last = frameSamples.get(session) ?? { received: 0, sent: 0 };
      frameTotals.received += session.framesReceived - last.received;
      frameTotals.sent += session.framesSent - last.sent;
      frameSamples.set(session, { received: session.framesReceived, sent: session.framesSent });
    }
    for (const session of frameSamples.keys()) if (!seen.has(session)) frameSamples.delete(session);
  };

  new Gauge({
    name: 'tunnel2_build_info',
    help: 'Always 1; labels say which tunnel2 and Node.js this edge runs',
    labelNames: ['version', 'node'],
    registers: [registry],
  }).set({ version, node: process.versions.node }, 1);

  new Gauge({
    name: 'tunnel2_sessions_connected',
    help: 'Agent sessions connected to this edge',
    registers: [registry],
    collect() {
      this.set(edge.sessions.size);
    },
  });
  new Gauge({
    name: 'tunnel2_streams_open',
    help: 'Streams (requests and WebSockets) open across all sessions',
    registers: [registry],
    collect() {
      let open = 0;
      for (const connection of edge.sessions.connections()) open += connection.session.streams.size;
      this.set(open);
    },
  });
  new Gauge({
    name: 'tunnel2_requests_in_flight',
    help: 'Public requests and WebSockets being carried through tunnels',
    registers: [registry],
    collect() {
      this.set(edge.inFlight);
    },
  });
  new Gauge({
    name: 'tunnel2_websocket_buffered_bytes',
    help: 'Bytes written towards agents and not yet flushed by their WebSockets (sum over sessions)',
    registers: [registry],
    collect() {
      let buffered = 0;
      for (const connection of edge.sessions.connections()) buffered += connection.session.bufferedBytes;
      this.set(buffered);
    },
  });
  new Gauge({
    name: 'tunnel2_window_growth_bytes',
    help: 'Receive-window growth response streams hold above their initial windows (sum over sessions; at most edgeWindowBudget)',
    registers: [registry],
    collect() {
      // Every session's growth is also taken from the edge-wide budget: its total is the sum.
      this.set(edge.windowBudget.used);
    },
  });
  new Counter({
    name: 'tunnel2_frames_received_total',
    help: 'Protocol frames received from agents',
    registers: [registry],
    collect() {
      sampleFrames();
      this.reset();
      this.inc(frameTotals.received);
    },
  });
  new Counter({
    name: 'tunnel2_frames_sent_total',
    help: 'Protocol frames sent to agents',
    registers: [registry],
    collect() {
      sampleFrames();
      this.reset();
      this.inc(frameTotals.sent);
    },
  });
  const bytesOf = (direction: keyof ByteTotals): Record<'public' | 'agent', number> => {
    const totals = { public: closedBytes.public[direction], agent: closedBytes.agent[direction] };
    for (const socket of live) {
      totals[agentSockets.has(socket) ? 'agent' : 'public'] +=
        direction === 'received' ? socket.bytesRead : socket.bytesWritten;
    }
    return totals;
  };
  countFrom(
    registry,
    'tunnel2_bytes_received_total',
    'Bytes read from sockets: side="public" (clients) or side="agent" (agent WebSockets)',
    'side',
    () => bytesOf('received'),
  );
  countFrom(
    registry,
    'tunnel2_bytes_sent_total',
    'Bytes written to sockets: side="public" (clients) or side="agent" (agent WebSockets)',
    'side',
    () => bytesOf('sent'),
  );

  countFrom(
    registry,
    'tunnel2_public_connections_dropped_total',
    'Public connections closed at accept: reason="open_files" (the cap kept below the open-file limit) or "per_address" (maxConnectionsPerAddress)',
    'reason',
    () => edge.publicConnections.dropped,
  );

  if (edge.tls !== undefined) collectTlsMetrics(registry, edge.tls);

  if (edge.tcp !== undefined) collectTcpMetrics(registry, edge.tcp);

  // Cluster mode: read from the node's own counters at scrape time, nothing per request here.
  const cluster = edge.cluster;
  if (cluster !== undefined) {
    countFrom(
      registry,
      'tunnel2_cluster_forwarded_total',
      'Requests and upgrades carried to the node holding their session, by outcome (ok, unreachable, aborted, not_here)',
      'outcome',
      () => cluster.counters.forwarded,
    );
    countFrom(
      registry,
      'tunnel2_cluster_hop_bytes_total',
      'Bytes carried between edge nodes (body bytes on the HTTP hop, whole messages on links): direction="out" (to the owner) or "in" (from it)',
      'direction',
      () => ({ out: cluster.hop.counters.bytesOut, in: cluster.hop.counters.bytesIn }),
    );
    countFrom(
      registry,
      'tunnel2_cluster_owner_lookups_total',
      'Lookups of the node holding a session: result="hit" (cache) or "miss" (registry)',
      'result',
      () => cluster.counters.lookups,
    );
    new Gauge({
      name: 'tunnel2_cluster_links',
      help: 'Node-to-node links this node has open to peer nodes (one per peer it forwards to)',
      registers: [registry],
      collect() {
        this.set(cluster.links?.size ?? 0);
      },
    });
    new Counter({
      name: 'tunnel2_cluster_node_auth_refused_total',
      help: 'Requests claiming to come from another node whose signature did not verify',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(cluster.counters.forged);
      },
    });
    new Counter({
      name: 'tunnel2_cluster_node_records_ignored_total',
      help: 'Node records read from the registry whose signature did not verify (unsigned, or written without the cluster secret): the node is treated as not announced',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(cluster.counters.ignoredRecords);
      },
    });
    countFrom(
      registry,
      'tunnel2_cluster_takeover_notices_sent_total',
      'Notices to the node that held a name this node took over: outcome="delivered", "failed" (that node closes at its next renewal round instead) or "dropped" (too many on their way)',
      'outcome',
      () => cluster.notices.counters,
    );
    countFrom(
      registry,
      'tunnel2_cluster_takeover_notices_received_total',
      'Takeover notices from other nodes: outcome="closed" (an older connection here closed) or "kept" (nothing older here: late, replayed, or already gone)',
      'outcome',
      () => cluster.counters.takeovers,
    );
  }

  // Every registry operation (memory or Redis): a Redis round trip is the cost cluster mode adds.
  const registryDuration = new Histogram({
    name: 'tunnel2_registry_operation_duration_seconds',
    help: 'Session registry operation duration by operation (claim, renewMany, lookup, lookupNode, ...), failed ones included',
    labelNames: ['operation'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  const registryErrors = new Counter({
    name: 'tunnel2_registry_errors_total',
    help: 'Session registry operations that failed (Redis unreachable, timed out, refused), by operation',
    labelNames: ['operation'],
    registers: [registry],
  });
  const byOperation = new Map(
    REGISTRY_OPERATIONS.map((operation) => [
      operation,
      { duration: registryDuration.labels({ operation }), errors: registryErrors.labels({ operation }) },
    ]),
  );
  // Zero-valued series from the start: a rate() over a counter that appears late misses its first errors.
  for (const { errors } of byOperation.values()) errors.inc(0);
  const unsubscribeRegistry = edge.registryTimings.subscribe((operation, seconds, failed) => {
    const series = byOperation.get(operation);
    if (series === undefined) return;
    series.duration.observe(seconds);
    if (failed) series.errors.inc();
  });

  // Counted in plain numbers per request, read into prom-client at scrape time (request-tally.ts).
  const tally = new RequestTally([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]);
  const requests = requestCounter(
    registry,
    'tunnel2_http_requests_total',
    'Public HTTP requests by response status class; class="aborted" when no complete response was sent',
    tally,
  );
  new TalliedHistogram(
    registry,
    'tunnel2_http_request_duration_seconds',
    'Public HTTP request duration, from the request head to the end of the response',
    tally,
  );
  const upgrades = new Counter({
    name: 'tunnel2_websocket_upgrades_total',
    help: 'Public WebSocket upgrades received, HTTP/1.1 and RFC 8441 (agent connections not included)',
    registers: [registry],
  });
  const agentConnects = new Counter({
    name: 'tunnel2_agent_connections_total',
    help: 'Agent WebSocket connection attempts (accepted or refused)',
    registers: [registry],
  });
  const rejected = new Counter({
    name: 'tunnel2_rejected_total',
    help: 'Requests, upgrades and agent connections the edge refused, by reason and stable error code',
    labelNames: ['reason', 'code'],
    registers: [registry],
  });
  const rejectedByCode = new Map(
    Object.values(EdgeErrorCode).map((code) => [
      code,
      rejected.labels({ reason: refusalReasonByCode[code], code }),
    ]),
  );

  const onConnection = (socket: Socket): void => {
    live.add(socket);
    socket.once('close', () => {
      // Folded before the session table forgets the agent, so its last frames are counted too.
      if (agentSockets.has(socket)) sampleFrames();
      live.delete(socket);
      const side = agentSockets.has(socket) ? closedBytes.agent : closedBytes.public;
      side.received += socket.bytesRead;
      side.sent += socket.bytesWritten;
    });
  };
  // One shared listener reading its start time from the response, rather than a closure and a `once`
  // wrapper per request: this runs for every public request, on the hot path. The time is a property of
  // the response, not a WeakMap entry: a WeakMap keyed by young objects costs a hash per request, a table
  // that grows and shrinks, and work in every scavenge (its table is old, its keys young); `onRequest` was
  // 1.5 µs of self time per request in the edge's closed-loop profile, 0.3 after (bench/README.md, #34).
  function onResponseClose(this: TimedResponse): void {
    const start = this[startedAt];
    const seconds = start === undefined ? undefined : (performance.now() - start) / 1000;
    tally.record(seconds, this.writableFinished, this.statusCode);
  }
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // An RFC 8441 WebSocket reaches here as an HTTP/2 request: counted once, as an upgrade, as over
    // HTTP/1.1 (its lifetime is no request's latency, its reset no aborted request).
    if (req.httpVersionMajor === 2 && req.headers[':protocol'] === 'websocket') {
      upgrades.inc();
      return;
    }
    (res as TimedResponse)[startedAt] = performance.now();
    res.on('close', onResponseClose);
  };
  const onUpgrade = (req: IncomingMessage): void => {
    if ((req.url ?? '').split('?')[0] === agentPath) {
      agentSockets.add(req.socket);
      agentConnects.inc();
    } else {
      upgrades.inc();
    }
  };
  const onRefusal = (message: unknown): void => {
    const { socket, code } = message as RefusalMessage;
    if (socket === null || !live.has(socket as Socket)) return;
    rejectedByCode.get(code)?.inc();
  };
  server.on('connection', onConnection);
  edge.http2Connections?.on('connection', onConnection);
  server.on('request', onRequest);
  server.on('checkContinue', onRequest);
  // Prepended: the agent endpoint may refuse (and publish) synchronously inside its own listener.
  server.prependListener('upgrade', onUpgrade);
  subscribe(refusalChannel.name, onRefusal);

  return {
    registry,
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
    async requestTotals() {
      const { values } = await requests.get();
      return Object.fromEntries(values.map((v) => [String(v.labels.class), v.value]));
    },
    close() {
      unsubscribeRegistry();
      server.off('connection', onConnection);
      edge.http2Connections?.off('connection', onConnection);
      server.off('request', onRequest);
      server.off('checkContinue', onRequest);
      server.off('upgrade', onUpgrade);
      unsubscribe(refusalChannel.name, onRefusal);
    },
  };
}
