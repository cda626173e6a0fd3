import { defaultWindowTuning, type ProtocolSettings } from '@tunnel2/protocol';
import { isRedisUrl, redactRedisUrl } from '@tunnel2/registry';
import type { AgentAuthOptions } from '../agents/agent-auth.js';
import { parseTcpPortRange } from '../tcp/tcp-port-range.js';
import {
  DEFAULT_EDGE_WINDOW_BUDGET,
  EDGE_HEARTBEAT_INTERVAL_MS,
  type EdgeOptions,
  isNodeId,
} from './edge-options.js';
import {
  integer,
  isAddressBlock,
  isDnsName,
  isUrl,
  list,
  oneOf,
  optionalBoolean,
  optionalInteger,
  optionalText,
  parseBoolean,
  type SettingSpec,
  text,
  workerCount,
} from './setting-parsers.js';

/**
 * Every setting an operator can give the edge, flat and serialisable: each one is a flag, a `TUNNEL2_*`
 * variable and a key of the `--config` file, all derived from the one table below.
 */
export interface EdgeSettings {
  port: number;
  host: string;
  domain: string;
  publicUrl: string | undefined;
  agentPath: string;
  /** Certificate files (PEM, chain after the leaf), the n-th going with the n-th of tlsKey. */
  tlsCert: string[];
  tlsKey: string[];
  httpPort: number | undefined;
  acmeDir: string | undefined;
  nodeId: string | undefined;
  /** `memory`, or a redis:// / rediss:// / redis+cluster:// / rediss+cluster:// URL shared by several nodes. */
  registry: string;
  responseTimeoutMs: number;
  leaseTtlMs: number;
  reconnectGraceMs: number;
  maxMessageSize: number;
  maxStreamWindow: number;
  sessionWindowBudget: number;
  edgeWindowBudget: number;
  helloTimeoutMs: number;
  maxSessionsPerOwner: number;
  maxRequestBodyBytes: number;
  maxHeaderBytes: number;
  maxStreamsPerSession: number;
  streamWaitMs: number;
  maxWaitingPerSession: number;
  sessionRequestRate: number;
  /** Undefined: one second's worth of sessionRequestRate. */
  sessionRequestBurst: number | undefined;
  reconnectWaitMs: number;
  startupGraceMs: number;
  probeTimeoutMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnectionsPerAddress: number;
  trustProxy: string[];
  showSessionCount: boolean;
  tcpPorts: string | undefined;
  maxTcpPortsPerOwner: number;
  nodeUrl: string | undefined;
  clusterSecret: string | undefined;
  tokens: string[];
  tokenFile: string | undefined;
  tokenSecret: string | undefined;
  /** Undefined: anonymous agents only when listening on loopback without tokens. */
  allowAnonymous: boolean | undefined;
  maxConcurrentStreams: number;
  maxFrameSize: number;
  initialStreamWindow: number;
  initialSessionWindow: number;
  heartbeatIntervalMs: number;
  adminPort: number | undefined;
  adminHost: string;
  opsOnPublicPort: boolean;
  drainTimeoutMs: number;
  /** Edge processes on this machine sharing its ports (`auto` = its cores, read as a number); 1: no fork. */
  workers: number;
  logLevel: LogLevel;
  logFormat: 'auto' | 'json' | 'pretty';
}

export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof logLevels)[number];

// The compiler keeps the table complete: an EdgeOptions field (or auth / protocol field) added without a
// setting here fails this line, so no edge option can be set in code but not by an operator.
// `cluster` is set from nodeUrl + clusterSecret, `tls` from tlsCert + tlsKey (+ httpPort, acmeDir); its tuning knobs (cache TTL, connect timeout) keep
// their defaults until measurements under a real load balancer say an operator needs them. `reusePort` follows
// from `workers` and the OS (workers/reuse-port.ts).
type Unconfigurable = 'logger' | 'auth' | 'protocol' | 'cluster' | 'tls' | 'reusePort';
type MissingSettings =
  | Exclude<keyof EdgeOptions, keyof EdgeSettings | Unconfigurable>
  | Exclude<keyof AgentAuthOptions, keyof EdgeSettings>
  | Exclude<keyof ProtocolSettings, keyof EdgeSettings>;
const everyOptionIsASetting: [MissingSettings] extends [never] ? true : MissingSettings = true;
void everyOptionIsASetting;

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** The one table of edge settings. Its order is the order of --help, --print-config and the docs. */
export const edgeSettingSpecs: { readonly [K in keyof EdgeSettings]: SettingSpec<EdgeSettings[K]> } = {
  port: {
    description: 'listen port for agents and public traffic (0 picks a free port)',
    default: 8080,
    short: 'p',
    ...integer(0, 65535),
  },
  host: {
    description: 'listen address (0.0.0.0 or :: in a container)',
    default: '127.0.0.1',
    short: 'H',
    ...text(),
  },
  domain: {
    description: 'tunnels answer at <name>.<domain>',
    default: 'localhost',
    short: 'd',
    ...text(isDnsName, 'a DNS name'),
  },
  publicUrl: {
    description:
      'base URL handed to agents, e.g. https://tunnel.example.com (default http://<domain>:<port>, https:// with tlsCert)',
    default: undefined,
    ...optionalText(isUrl, 'an absolute URL'),
  },
  agentPath: {
    description: 'path where agents open their WebSocket',
    default: '/_tunnel2/connect',
    ...text((v) => v.startsWith('/'), 'a path starting with /'),
  },
  tlsCert: {
    description:
      'serve HTTPS (the protocol chosen by ALPN) and wss:// on the public port with this PEM certificate (chain after it); repeat with tlsKey for several pairs, chosen by SNI (exact names before wildcards, else the first); reloaded when the files change or on SIGHUP (unset: plain HTTP, as behind a TLS terminator)',
    default: [],
    ...list(
      undefined,
      'a list of PEM file paths (repeat the flag; comma-separated in a variable, an array in the file)',
    ),
  },
  tlsKey: {
    description: 'the private key (PEM, unencrypted) of the tlsCert at the same position',
    default: [],
    ...list(
      undefined,
      'a list of PEM file paths (repeat the flag; comma-separated in a variable, an array in the file)',
    ),
  },
  httpPort: {
    description:
      'with tlsCert: a plain HTTP port on the same host answering every request with 308 to https:// (ACME HTTP-01 challenges served from acmeDir) (unset: none)',
    default: undefined,
    ...optionalInteger(0, 65535),
  },
  acmeDir: {
    description:
      'with httpPort: the webroot whose .well-known/acme-challenge/<token> files (or <token> files directly in it) answer /.well-known/acme-challenge/<token> (certbot --webroot -w, lego --http.webroot, acme.sh -w)',
    default: undefined,
    ...optionalText(),
  },
  nodeId: {
    description:
      "this node's id in the session registry and in node-to-node signatures (default: random per start)",
    default: undefined,
    ...optionalText(isNodeId, '1-64 letters, digits, dots, hyphens or underscores'),
  },
  registry: {
    description:
      'session registry: memory (one node), or a redis:// or rediss:// URL several nodes share, or redis+cluster://host:port,host:port (rediss+cluster://) for a Redis Cluster (then nodeUrl and clusterSecret are required)',
    default: 'memory',
    ...text(isRegistry, 'memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL'),
    redact: redactRedisUrl,
  },
  responseTimeoutMs: {
    description: 'a tunnelled request without a response head in this time gets 504',
    default: MINUTE,
    ...integer(1, HOUR),
  },
  leaseTtlMs: {
    description: "lifetime of a session's registry lease without renewal",
    default: 30_000,
    ...integer(1_000, HOUR),
  },
  reconnectGraceMs: {
    description:
      "how long a lost session's names and TCP ports stay reserved for its owner (an agent that closes gracefully frees them at once)",
    default: MINUTE,
    ...integer(0, 24 * HOUR),
  },
  maxMessageSize: {
    description: 'largest WebSocket message accepted from an agent (bytes)',
    default: 4 * 1024 * 1024,
    ...integer(64 * 1024, 64 * 1024 * 1024),
  },
  maxStreamWindow: {
    description:
      "auto-tuning: largest a response stream's window grows to when its agent is a real round trip away and the client keeps up (bytes; 0 or at most initialStreamWindow: off)",
    default: defaultWindowTuning.maxStreamWindow,
    ...integer(0, 0x7f_ff_ff_ff),
  },
  sessionWindowBudget: {
    description:
      "auto-tuning: window growth one agent's response streams may hold together, also added to its session window (bytes; 0: off); one agent's response bytes held ≤ min(streams × initialStreamWindow, initialSessionWindow) + this",
    default: defaultWindowTuning.sessionWindowBudget,
    ...integer(0, 0x7f_ff_ff_ff),
  },
  edgeWindowBudget: {
    description:
      'auto-tuning: window growth all agents together may hold on this edge (bytes); response bytes held ≤ Σ per agent min(streams × initialStreamWindow, initialSessionWindow + sessionWindowBudget) + this',
    default: DEFAULT_EDGE_WINDOW_BUDGET,
    ...integer(0, Number.MAX_SAFE_INTEGER),
  },
  helloTimeoutMs: {
    description: 'time an agent has to send its HELLO after connecting',
    default: 10_000,
    ...integer(1, 10 * MINUTE),
  },
  maxSessionsPerOwner: {
    description:
      'live tunnels one token (or, for anonymous agents, one client address) may hold on this node',
    default: 20,
    ...integer(1, 1_000_000),
  },
  maxRequestBodyBytes: {
    description: 'largest request body carried through a tunnel (413 beyond)',
    default: 8 * 1024 * 1024 * 1024,
    ...integer(0, Number.MAX_SAFE_INTEGER),
  },
  maxHeaderBytes: {
    description: 'largest public request head (431 beyond)',
    default: 16 * 1024,
    ...integer(1024, 1024 * 1024),
  },
  maxStreamsPerSession: {
    description: 'concurrent requests one tunnel carries; more wait for a slot, then 503',
    default: 1000,
    ...integer(1, 1_000_000),
  },
  streamWaitMs: {
    description: 'how long a request waits for a free stream slot before 503 (0: no wait)',
    default: 1_000,
    ...integer(0, MINUTE),
  },
  maxWaitingPerSession: {
    description: 'requests one tunnel may hold waiting for a slot; beyond, 503 at once',
    default: 256,
    ...integer(0, 100_000),
  },
  sessionRequestRate: {
    description: 'requests per second one tunnel accepts (429 beyond; 0: no limit)',
    default: 0,
    ...integer(0, 1_000_000),
  },
  sessionRequestBurst: {
    description: 'burst above sessionRequestRate (default: one second of it)',
    default: undefined,
    ...optionalInteger(1, 10_000_000),
  },
  reconnectWaitMs: {
    description:
      "how long a request waits for a reconnecting tunnel's agent before 502 (0: no wait); in a cluster, how long a TCP connection is held (nothing sent on) for it before it is reset",
    default: 5_000,
    ...integer(0, MINUTE),
  },
  startupGraceMs: {
    description:
      'for this long after start, a request for a well-formed name no agent holds waits (up to reconnectWaitMs) for its agent to reconnect, then gets 503 with Retry-After instead of 404; in a cluster, only names the registry holds (0: off)',
    // An agent's longest reconnect backoff: by then every agent of the previous process has tried again.
    default: 30_000,
    ...integer(0, HOUR),
  },
  probeTimeoutMs: {
    description:
      'a request sent to an agent quiet for a second is followed by a ping; no answer within this ends the session and the request gets 502 (0: off)',
    default: 2_000,
    ...integer(0, MINUTE),
  },
  headersTimeoutMs: {
    description: 'time a client has to send its request head (408 beyond)',
    default: 20_000,
    ...integer(100, 10 * MINUTE),
  },
  requestTimeoutMs: {
    description: 'time a client has to send its whole request (408 beyond; 0: no limit)',
    default: 5 * MINUTE,
    ...integer(0, 24 * HOUR),
  },
  keepAliveTimeoutMs: {
    description: 'an idle keep-alive client connection is closed after this',
    default: 5_000,
    ...integer(1, 10 * MINUTE),
  },
  idleTimeoutMs: {
    description:
      'a client connection silent both ways this long is closed (aborts a body stalled mid-way; also cuts quiet SSE streams); keep above responseTimeoutMs (0: no limit)',
    default: 0,
    ...integer(0, 24 * HOUR),
  },
  maxConnectionsPerAddress: {
    description:
      'public connections one client address may hold open at once, beyond which new ones are closed at accept (0: no cap; trustProxy peers are exempt)',
    default: 0,
    ...integer(0, 10_000_000),
  },
  trustProxy: {
    description:
      'addresses or CIDR blocks of proxies in front whose X-Forwarded-For/-Proto/-Host/-Prefix are believed; from any other peer they are replaced (default: none)',
    default: [],
    ...list(
      isAddressBlock,
      'a list of IP addresses or CIDR blocks (comma-separated in a variable, an array in the file)',
    ),
  },
  showSessionCount: {
    description: 'show the number of live sessions on the public landing page',
    default: false,
    parse: parseBoolean,
    allowed: 'true or false',
  },
  tcpPorts: {
    description:
      "public ports for TCP tunnels (`tunnel2 tcp`), e.g. 20000-20999, listened on at the edge's host (unset: no TCP tunnels)",
    default: undefined,
    ...optionalText((v) => parseTcpPortRange(v) !== undefined, 'a port range like 20000-20999'),
  },
  maxTcpPortsPerOwner: {
    description:
      'TCP tunnel ports one token (or, for anonymous agents, one client address) may hold, those kept in their reconnect grace included (across the cluster with a shared registry)',
    default: 5,
    ...integer(1, 65535),
  },
  nodeUrl: {
    description:
      'cluster mode: the http(s) origin other edge nodes reach this one at (unset: one node, no forwarding)',
    default: undefined,
    ...optionalText(isUrl, 'an absolute URL'),
  },
  clusterSecret: {
    description:
      'cluster mode: shared secret that authenticates node-to-node requests (at least 32 characters; required with nodeUrl)',
    default: undefined,
    secret: true,
    ...optionalText((v) => v.length >= 32, 'at least 32 characters'),
  },
  tokens: { description: 'accepted agent tokens', default: [], secret: true, flag: 'token', ...list() },
  tokenFile: {
    description: 'file of accepted agent tokens, one per line (# comments), added to tokens',
    default: undefined,
    ...optionalText(),
  },
  tokenSecret: {
    description: 'accept agent tokens signed with this secret (at least 16 characters)',
    default: undefined,
    secret: true,
    ...optionalText(),
  },
  allowAnonymous: {
    description: 'accept agents without a token (default: only on a loopback address without tokens)',
    default: undefined,
    ...optionalBoolean(),
  },
  maxConcurrentStreams: {
    description: 'requests one agent may have in flight at once (announced in HELLO)',
    default: 1000,
    ...integer(0, 1_000_000),
  },
  maxFrameSize: {
    description: 'largest protocol frame accepted from agents; bounds a response head (bytes)',
    default: 64 * 1024,
    ...integer(16 * 1024, 16 * 1024 * 1024 - 1),
  },
  initialStreamWindow: {
    description: 'response bytes an agent may send on one stream before credit is returned',
    default: 256 * 1024,
    ...integer(0, 0x7f_ff_ff_ff),
  },
  initialSessionWindow: {
    description: 'response bytes an agent may send on its whole session before credit is returned',
    default: 16 * 1024 * 1024,
    ...integer(0, 0x7f_ff_ff_ff),
  },
  heartbeatIntervalMs: {
    description: 'ping interval; an agent silent for two intervals is dropped (0 disables)',
    default: EDGE_HEARTBEAT_INTERVAL_MS,
    ...integer(0, HOUR),
  },
  adminPort: {
    description: 'port of the operations endpoints /healthz, /readyz, /metrics (unset: off)',
    default: undefined,
    ...optionalInteger(0, 65535),
  },
  adminHost: { description: 'listen address of the operations endpoints', default: '127.0.0.1', ...text() },
  opsOnPublicPort: {
    description:
      'also serve /healthz, /readyz and /metrics on the public port (exposes them to the internet)',
    default: false,
    parse: parseBoolean,
    allowed: 'true or false',
  },
  drainTimeoutMs: {
    description: 'on SIGTERM, how long in-flight requests may take to finish before the edge stops',
    default: 10_000,
    ...integer(0, HOUR),
  },
  workers: {
    description:
      'edge worker processes sharing the ports (auto: one per core); above 1 a primary forks them, holds the registry, restarts a worker that dies and drains them all on SIGTERM',
    default: 1,
    ...workerCount(),
  },
  logLevel: { description: 'log level', default: 'info', ...oneOf(logLevels) },
  logFormat: {
    description:
      'pretty: one human line per event (coloured on a terminal); json: one JSON object per line; auto: pretty when stdout and stderr are terminals, else json',
    default: 'auto',
    ...oneOf(['auto', 'json', 'pretty'] as const),
  },
};

export type SettingKey = keyof EdgeSettings;

export const settingKeys = Object.keys(edgeSettingSpecs) as SettingKey[];

export function flagOf(key: SettingKey): string {
  return edgeSettingSpecs[key].flag ?? key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

export function envOf(key: SettingKey): string {
  return edgeSettingSpecs[key].env ?? `TUNNEL2_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

export function isBooleanSetting(key: SettingKey): boolean {
  return typeof edgeSettingSpecs[key].default === 'boolean' || key === 'allowAnonymous';
}

export function isListSetting(key: SettingKey): boolean {
  return Array.isArray(edgeSettingSpecs[key].default);
}

/** The effective configuration with secrets redacted, for --print-config and the startup log. */
export function redactedConfig(settings: EdgeSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of settingKeys) {
    const value = settings[key];
    const spec: SettingSpec<unknown> = edgeSettingSpecs[key];
    if (spec.secret && value !== undefined) {
      out[key] = Array.isArray(value) ? value.map(() => '<redacted>') : '<redacted>';
    } else if (spec.redact !== undefined && typeof value === 'string') {
      out[key] = spec.redact(value);
    } else {
      out[key] = value ?? null;
    }
  }
  return out;
}

function isRegistry(value: string): boolean {
  return value === 'memory' || isRedisUrl(value);
}
