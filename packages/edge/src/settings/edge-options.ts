import { randomUUID } from 'node:crypto';
import type { BlockList } from 'node:net';
import { defaultWindowTuning, MAX_WINDOW, type ProtocolSettings } from '@tunnel2/protocol';
import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { compileAddressBlocks } from '../access/client-address.js';
import type { AgentAuthOptions } from '../agents/agent-auth.js';
import type { ClusterOptions, ResolvedClusterOptions } from '../cluster/cluster.js';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import { parseTcpPortRange, type TcpPortRange } from '../tcp/tcp-port-range.js';

/** The files of one certificate and its key, as the operator named them (`tlsCert`/`tlsKey`). */
export interface CertificateFiles {
  cert: string;
  key: string;
}

export interface EdgeOptions {
  /** Listen port; 0 picks a free one. */
  port?: number;
  /** Listen address. */
  host?: string;
  /** Sessions are reachable as `<name>.<domain>`; `localhost` works locally since `*.localhost` is loopback. */
  domain?: string;
  /** Base of the public URLs handed to agents, e.g. `https://tunnel.example.com`. Default: `http://<domain>:<port>`. */
  publicUrl?: string;
  /** Where agents open their WebSocket. */
  agentPath?: string;
  registry?: SessionRegistry;
  /** This node's id in the registry. */
  nodeId?: string;
  logger?: Logger;
  /** A tunnel request that gets no response head within this time is answered 504. */
  responseTimeoutMs?: number;
  /** How long a session's lease lives in the registry without renewal. */
  leaseTtlMs?: number;
  /** How long a disconnected session's name stays reserved for its owner. */
  reconnectGraceMs?: number;
  /** What the edge accepts from agents (announced in its HELLO); heartbeatIntervalMs defaults to 3 s here. */
  protocol?: Partial<ProtocolSettings>;
  /** Largest WebSocket message accepted from an agent. */
  maxMessageSize?: number;
  /**
   * Largest receive window a response stream grows to by auto-tuning (bytes), when the agent is a real round
   * trip away and the public client keeps up. Default 16 MiB; at most protocol.initialStreamWindow: no growth.
   */
  maxStreamWindow?: number;
  /**
   * Window growth one agent session's response streams may hold together above their initial windows, and
   * what its session window grows by (bytes). Default 32 MiB; 0 turns auto-tuning off.
   */
  sessionWindowBudget?: number;
  /**
   * Window growth all agent sessions of this edge may hold together (bytes). Default 256 MiB: what peers may
   * fill beyond the initial windows is at most this, however many sessions and streams.
   */
  edgeWindowBudget?: number;
  /** Time an agent has to send its HELLO after the WebSocket opens. */
  helloTimeoutMs?: number;
  /**
   * Who may connect agents. Without tokens or a secret, anonymous agents are accepted only on a loopback
   * address, or when `allowAnonymous` is set explicitly.
   */
  auth?: AgentAuthOptions;
  /** Live sessions one token (or, for anonymous agents, one client address) may hold on this node. */
  maxSessionsPerOwner?: number;
  /** Largest request body carried through a tunnel (413 beyond). */
  maxRequestBodyBytes?: number;
  /** Largest public request head (request line and headers); Node answers 431 beyond. */
  maxHeaderBytes?: number;
  /** Concurrent requests one session carries (the agent may announce fewer); more wait, then 503. */
  maxStreamsPerSession?: number;
  /** How long a request waits for a free stream slot before 503 + Retry-After. 0: no wait. */
  streamWaitMs?: number;
  /** Requests one session may hold waiting for a slot; beyond, 503 at once (bounds memory). */
  maxWaitingPerSession?: number;
  /** Requests per second one session accepts (token bucket; 429 + Retry-After beyond). 0: no limit. */
  sessionRequestRate?: number;
  /** Burst the rate limit allows above its rate. Default: one second's worth. */
  sessionRequestBurst?: number;
  /** How long a request for a name whose agent is reconnecting waits for it before 502. 0: no wait. */
  reconnectWaitMs?: number;
  /**
   * For this long after `listen()`, a request for a well-formed name no agent holds waits (up to
   * `reconnectWaitMs`) for an agent to claim it, then gets 503 TUNNEL2_ERR_TUNNEL_PENDING with Retry-After
   * instead of 404: the agents of the process this one replaced are reconnecting (startup-grace.ts).
   * After it an unknown name is a prompt 404. Default 0 here, for a program that embeds a fresh edge (and
   * its tests); `tunnel2 server` defaults to 30 s (edge-config.ts), an agent's longest reconnect backoff.
   */
  startupGraceMs?: number;
  /**
   * A request sent to an agent quiet for a second is followed by a PING; an agent that sends nothing within
   * this many ms is gone (the session closes, the request gets 502) instead of after two heartbeat
   * intervals. Catches a frozen agent (a laptop lid closed) on the first request. Default 2 s; 0: off.
   */
  probeTimeoutMs?: number;
  /** Time a client has to send its request head (408 beyond); bounds slow-loris clients. */
  headersTimeoutMs?: number;
  /** Time a client has to send its whole request, head and body (408 beyond). 0: no limit. */
  requestTimeoutMs?: number;
  /** An idle keep-alive client connection is closed after this. */
  keepAliveTimeoutMs?: number;
  /**
   * Public connections one peer address may hold open at once (idle, busy or upgraded); a new one beyond
   * is closed at accept and counted. The socket's address, never X-Forwarded-For: peers in `trustProxy`
   * are exempt (they carry many clients). 0 (the default): no cap.
   */
  maxConnectionsPerAddress?: number;
  /**
   * A client connection with no bytes in either direction for this long is closed (a response stalled
   * mid-body is then aborted). Off by default: an idle SSE stream looks exactly like a stalled body, and
   * quiet streams must outlive every timer (heartbeats keep the agent's session). Should exceed
   * `responseTimeoutMs` when set, or the 504 is never seen. 0: no limit.
   */
  idleTimeoutMs?: number;
  /**
   * Addresses or CIDR blocks of proxies in front of the edge (a TLS terminator, a load balancer) whose
   * X-Forwarded-For / -Proto / -Host / -Prefix are believed. From any other peer those fields, Forwarded
   * and X-Real-IP are removed and the edge sets its own. Default: none.
   */
  trustProxy?: readonly string[];
  /** Show the number of live sessions on the landing page (it is public). Default: false. */
  showSessionCount?: boolean;
  /**
   * Public ports for TCP tunnels, `20000-20999` (or one port). Default: none, and then the edge listens on
   * no port but its own and refuses TCP tunnels.
   */
  tcpPorts?: string;
  /**
   * TCP ports one token (or, for anonymous agents, one client address) may hold at once, those kept in their
   * reconnect grace included (at the limit the oldest of those is given back). Default 5.
   */
  maxTcpPortsPerOwner?: number;
  /**
   * Cluster mode: several edges share `registry`, and a request for a session held by another node is
   * forwarded to it. Off when undefined (one node: nothing changes).
   */
  cluster?: ClusterOptions;
  /** TLS on the public port; undefined: plain HTTP (behind a TLS terminator, or local). */
  tls?: EdgeTlsOptions;
  /**
   * Bind the public, redirect and TCP ports with SO_REUSEPORT, each process its own socket beside its
   * siblings' (a worker of `--workers N` on Linux/FreeBSD: the kernel spreads the connections, node:cluster's
   * primary is not asked). Default false: one process holds each port alone, as a single edge always has.
   */
  reusePort?: boolean;
}

/**
 * TLS on the public port: HTTPS with ALPN h2 / http/1.1 and wss:// for agents, certificates chosen by SNI and
 * reloaded when their files change (listeners/certificate-store.ts).
 */
export interface EdgeTlsOptions {
  /** At least one; the first also serves clients without SNI or with a name no certificate has. */
  pairs: CertificateFiles[];
  /** A plain port that redirects to HTTPS (listeners/https-redirect.ts); 0 picks a free one. */
  httpPort?: number;
  /** ACME HTTP-01 answers served on httpPort. */
  acmeDir?: string;
  /** How often the files are read besides file events. Default 60 s. */
  pollMs?: number;
  /** A TLS handshake must complete within this. Default: headersTimeoutMs. */
  handshakeTimeoutMs?: number;
}

export interface ResolvedEdgeOptions {
  port: number;
  host: string;
  domain: string;
  publicUrl: string | undefined;
  agentPath: string;
  registry: SessionRegistry;
  ownsRegistry: boolean;
  nodeId: string;
  responseTimeoutMs: number;
  leaseTtlMs: number;
  reconnectGraceMs: number;
  protocol: Partial<ProtocolSettings>;
  maxMessageSize: number;
  maxStreamWindow: number;
  sessionWindowBudget: number;
  edgeWindowBudget: number;
  helloTimeoutMs: number;
  auth: AgentAuthOptions & { allowAnonymous: boolean };
  maxSessionsPerOwner: number;
  maxRequestBodyBytes: number;
  maxHeaderBytes: number;
  maxStreamsPerSession: number;
  streamWaitMs: number;
  maxWaitingPerSession: number;
  sessionRequestRate: number;
  sessionRequestBurst: number;
  reconnectWaitMs: number;
  startupGraceMs: number;
  probeTimeoutMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnectionsPerAddress: number;
  idleTimeoutMs: number;
  trustProxy: readonly string[];
  /** `trustProxy` compiled once, here where it is validated; undefined when the list is empty. */
  trustedProxies: BlockList | undefined;
  showSessionCount: boolean;
  tcpPorts: TcpPortRange | undefined;
  maxTcpPortsPerOwner: number;
  cluster: ResolvedClusterOptions | undefined;
  tls: EdgeTlsOptions | undefined;
  reusePort: boolean;
}

/**
 * The heartbeat interval the edge announces unless `protocol.heartbeatIntervalMs` says otherwise. The
 * protocol's default is 10 s and the two sides agree on the shorter interval (PROTOCOL.md §7), so every
 * agent, old or new, gets this one: a silent agent is gone two to three intervals after its last message,
 * 6–9 s, inside the 10 s a frozen agent may hold its tunnel (20–30 s at 10 s). The price: a 17-byte PING
 * and its ACK each way every 3 s per idle session instead of every 10 s.
 */
export const EDGE_HEARTBEAT_INTERVAL_MS = 3_000;

/** A quarter of a 1 GiB machine: eight sessions at full growth, far more at the sizes real paths need. */
export const DEFAULT_EDGE_WINDOW_BUDGET = 256 * 1024 * 1024;

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

function positive(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option ${name}=${value}: must be an integer in [${min}, ${max}]`,
    );
  }
  return value;
}

/** A node id travels inside the node-to-node signature (space-separated) and in a response header. */
export function isNodeId(value: string): boolean {
  return /^[A-Za-z0-9._-]{1,64}$/.test(value);
}

function nodeIdOf(nodeId: string | undefined): string {
  if (nodeId === undefined) return randomUUID();
  if (!isNodeId(nodeId)) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option nodeId=${JSON.stringify(nodeId.slice(0, 80))}: must be 1-64 letters, digits, dots, hyphens or underscores`,
    );
  }
  return nodeId;
}

export function resolveEdgeOptions(options: EdgeOptions): ResolvedEdgeOptions {
  const domain = (options.domain ?? 'localhost').toLowerCase().replace(/\.$/, '');
  if (!/^[a-z0-9.-]+$/.test(domain) || domain.startsWith('.') || domain.includes('..')) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option domain=${domain}: must be a DNS name`,
    );
  }
  const agentPath = options.agentPath ?? '/_tunnel2/connect';
  if (!agentPath.startsWith('/')) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option agentPath=${agentPath}: must start with /`,
    );
  }
  if (options.publicUrl !== undefined && !URL.canParse(options.publicUrl)) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option publicUrl=${options.publicUrl}: not a URL`,
    );
  }
  const host = options.host ?? '127.0.0.1';
  const auth = options.auth ?? {};
  const hasCredentials = (auth.tokens?.length ?? 0) > 0 || (auth.tokenSecret ?? '') !== '';
  const allowAnonymous = auth.allowAnonymous ?? (!hasCredentials && isLoopback(host));
  if (!hasCredentials && !allowAnonymous) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `refusing to accept agents on ${host} without authentication: configure agent tokens or a token secret, ` +
        'or allow anonymous agents explicitly (allowAnonymous / --allow-anonymous)',
    );
  }
  if (auth.tokenSecret !== undefined && auth.tokenSecret.length < 16) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      'invalid edge option tokenSecret: must be at least 16 characters',
    );
  }
  const headersTimeoutMs = options.headersTimeoutMs ?? 20_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 300_000;
  if (requestTimeoutMs !== 0 && requestTimeoutMs < headersTimeoutMs) {
    // Node refuses a request timeout shorter than the head timeout; say which options clash.
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option requestTimeoutMs=${requestTimeoutMs}: must be 0 or at least headersTimeoutMs=${headersTimeoutMs}`,
    );
  }
  const trustProxy = [...(options.trustProxy ?? [])];
  const compiled = compileAddressBlocks(trustProxy);
  if ('invalid' in compiled) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option trustProxy: "${compiled.invalid}" is not an IP address or CIDR block`,
    );
  }
  return {
    port: positive('port', options.port ?? 8080, 0, 65535),
    host,
    domain,
    publicUrl: options.publicUrl,
    agentPath,
    registry: options.registry ?? createMemoryRegistry(),
    ownsRegistry: options.registry === undefined,
    nodeId: nodeIdOf(options.nodeId),
    responseTimeoutMs: positive('responseTimeoutMs', options.responseTimeoutMs ?? 60_000, 1, 3_600_000),
    leaseTtlMs: positive('leaseTtlMs', options.leaseTtlMs ?? 30_000, 1_000, 3_600_000),
    reconnectGraceMs: positive('reconnectGraceMs', options.reconnectGraceMs ?? 60_000, 0, 86_400_000),
    protocol: { heartbeatIntervalMs: EDGE_HEARTBEAT_INTERVAL_MS, ...options.protocol },
    maxMessageSize: positive(
      'maxMessageSize',
      options.maxMessageSize ?? 4 * 1024 * 1024,
      64 * 1024,
      64 * 1024 * 1024,
    ),
    maxStreamWindow: positive(
      'maxStreamWindow',
      options.maxStreamWindow ?? defaultWindowTuning.maxStreamWindow,
      0,
      MAX_WINDOW,
    ),
    sessionWindowBudget: positive(
      'sessionWindowBudget',
      options.sessionWindowBudget ?? defaultWindowTuning.sessionWindowBudget,
      0,
      MAX_WINDOW,
    ),
    edgeWindowBudget: positive(
      'edgeWindowBudget',
      options.edgeWindowBudget ?? DEFAULT_EDGE_WINDOW_BUDGET,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    helloTimeoutMs: positive('helloTimeoutMs', options.helloTimeoutMs ?? 10_000, 1, 600_000),
    auth: { ...auth, allowAnonymous },
    maxSessionsPerOwner: positive('maxSessionsPerOwner', options.maxSessionsPerOwner ?? 20, 1, 1_000_000),
    maxRequestBodyBytes: positive(
      'maxRequestBodyBytes',
      options.maxRequestBodyBytes ?? 8 * 1024 * 1024 * 1024,
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    maxHeaderBytes: positive('maxHeaderBytes', options.maxHeaderBytes ?? 16 * 1024, 1024, 1024 * 1024),
    maxStreamsPerSession: positive(
      'maxStreamsPerSession',
      options.maxStreamsPerSession ?? 1000,
      1,
      1_000_000,
    ),
    streamWaitMs: positive('streamWaitMs', options.streamWaitMs ?? 1_000, 0, 60_000),
    maxWaitingPerSession: positive('maxWaitingPerSession', options.maxWaitingPerSession ?? 256, 0, 100_000),
    sessionRequestRate: positive('sessionRequestRate', options.sessionRequestRate ?? 0, 0, 1_000_000),
    sessionRequestBurst: positive(
      'sessionRequestBurst',
      options.sessionRequestBurst ?? Math.max(1, options.sessionRequestRate ?? 0),
      1,
      10_000_000,
    ),
    reconnectWaitMs: positive('reconnectWaitMs', options.reconnectWaitMs ?? 5_000, 0, 60_000),
    startupGraceMs: positive('startupGraceMs', options.startupGraceMs ?? 0, 0, 3_600_000),
    probeTimeoutMs: positive('probeTimeoutMs', options.probeTimeoutMs ?? 2_000, 0, 60_000),
    headersTimeoutMs: positive('headersTimeoutMs', headersTimeoutMs, 100, 600_000),
    requestTimeoutMs: positive('requestTimeoutMs', requestTimeoutMs, 0, 86_400_000),
    keepAliveTimeoutMs: positive('keepAliveTimeoutMs', options.keepAliveTimeoutMs ?? 5_000, 1, 600_000),
    idleTimeoutMs: positive('idleTimeoutMs', options.idleTimeoutMs ?? 0, 0, 86_400_000),
    maxConnectionsPerAddress: positive(
      'maxConnectionsPerAddress',
      options.maxConnectionsPerAddress ?? 0,
      0,
      10_000_000,
    ),
    trustProxy,
    trustedProxies: trustProxy.length > 0 ? compiled : undefined,
    showSessionCount: options.showSessionCount ?? false,
    tcpPorts: tcpPortsOf(options.tcpPorts),
    maxTcpPortsPerOwner: positive('maxTcpPortsPerOwner', options.maxTcpPortsPerOwner ?? 5, 1, 65535),
    cluster: options.cluster === undefined ? undefined : resolveClusterOptions(options.cluster),
    tls: resolveTls(options.tls),
    reusePort: options.reusePort === true,
  };
}

function tcpPortsOf(text: string | undefined): TcpPortRange | undefined {
  if (text === undefined) return undefined;
  const range = parseTcpPortRange(text);
  if (range === undefined) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option tcpPorts=${text}: expected a port range like 20000-20999`,
    );
  }
  return range;
}

function resolveClusterOptions(cluster: ClusterOptions): ResolvedClusterOptions {
  let url: URL | undefined;
  try {
    url = cluster.nodeUrl === undefined ? undefined : new URL(cluster.nodeUrl);
  } catch {
    url = undefined;
  }
  if (cluster.nodeUrl === undefined) {
    // Announced as the bound address once listening.
  } else if (
    url === undefined ||
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.pathname !== '/'
  ) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid edge option nodeUrl=${cluster.nodeUrl}: must be an http:// or https:// origin other nodes reach this one at`,
    );
  }
  // Never echo the secret itself, only what is wrong with it.
  if (typeof cluster.secret !== 'string' || cluster.secret.length < 32) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      'invalid edge option clusterSecret: cluster mode needs a secret of at least 32 characters',
    );
  }
  return {
    nodeUrl: url?.origin,
    secret: cluster.secret,
    announceTtlMs: positive('cluster.announceTtlMs', cluster.announceTtlMs ?? 15_000, 1_000, 3_600_000),
    ownerCacheTtlMs: positive('cluster.ownerCacheTtlMs', cluster.ownerCacheTtlMs ?? 2_000, 0, 600_000),
    ownerCacheSize: positive('cluster.ownerCacheSize', cluster.ownerCacheSize ?? 10_000, 0, 10_000_000),
    connectTimeoutMs: positive('cluster.connectTimeoutMs', cluster.connectTimeoutMs ?? 2_000, 1, 60_000),
    connectionsPerNode: positive('cluster.connectionsPerNode', cluster.connectionsPerNode ?? 64, 1, 10_000),
    // TUNNEL2_NODE_LINK=off is a bench and rolling-upgrade switch (measuring the HTTP hop, acting as a node
    // from before links), read here on purpose rather than being an operator setting of the edge.
    nodeLink: cluster.nodeLink ?? process.env.TUNNEL2_NODE_LINK !== 'off',
    // Likewise a rolling-upgrade switch only: on, it reopens what signed records close (docs/scaling.md).
    unsignedNodeRecords: cluster.unsignedNodeRecords ?? process.env.TUNNEL2_NODE_RECORDS === 'unsigned-ok',
  };
}

function resolveTls(tls: EdgeTlsOptions | undefined): EdgeTlsOptions | undefined {
  if (tls === undefined) return undefined;
  if (tls.pairs.length === 0) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      'invalid edge option tls: needs at least one certificate and key',
    );
  }
  if (tls.httpPort !== undefined) positive('tls.httpPort', tls.httpPort, 0, 65535);
  if (tls.acmeDir !== undefined && tls.httpPort === undefined) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      'invalid edge option tls.acmeDir: served on tls.httpPort, which is unset',
    );
  }
  return tls;
}
