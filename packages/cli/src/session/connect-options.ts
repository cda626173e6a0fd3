import type { ProtocolSettings, VersionRange } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { AgentError, AgentErrorCode } from '../errors.js';
import type { HostHeaderMode } from '../forwarding/forward-options.js';

// Not an `import`: an ESM import of node:crypto reads every export, and its `webcrypto` getter loads Web
// Crypto, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { createHash } = process.getBuiltinModule('node:crypto');
// Not an `import`: an ESM import of node:net reads every export, and its `BlockList` and `SocketAddress`
// getters load both, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { isIP } = process.getBuiltinModule('node:net');

export interface ConnectOptions {
  /** The tunnel's name in a config file (`tunnels.<name>`): it prefixes its output and its errors. */
  label?: string;
  /** The config file the tunnel comes from, as the user named it: a refusal says which of its keys to change. */
  configFile?: string;
  /** Local target: a port, `host:port` or URL. */
  target: string | number;
  /** Edge base URL (http(s)://, or ws(s)://). Default: `TUNNEL2_SERVER`, else `http://localhost:8080`. */
  server?: string;
  /** Requested subdomain; else the edge picks a random, unguessable one. */
  subdomain?: string;
  /**
   * Join the subdomain as a replica (`--replica`): other agents with the same token (or agent key) that ask
   * so too serve it beside this one, the edge balancing requests over them. Needs `subdomain` and an HTTP
   * target. Default false: one agent per name, a newer run of the same owner takes it over.
   */
  replica?: boolean;
  /** Agent token. Default: `TUNNEL2_TOKEN`. */
  token?: string;
  /**
   * What identifies a token-less agent to the edge, so a new run reclaims the names a previous run with the
   * same key held (within the edge's grace). Default: a new random key per Tunnel. The CLI passes the key
   * kept in the user's config directory (agent-key.ts).
   */
  agentKey?: string;
  /** `rewrite` (default): the backend sees `Host: <target host:port>`; `preserve`: the public host; any other string: that value. */
  hostHeader?: string;
  logger?: Logger;
  /** An https:// target: accept any certificate (self-signed, expired, another host's). Default false. */
  insecure?: boolean;
  /** An https:// target: PEM of a private CA to trust besides Node's bundled ones (the CLI's --ca <file>). */
  ca?: string | Buffer;
  /**
   * The backend speaks HTTP/2 with prior knowledge (`--h2c`: gRPC servers, h2c-only apps). Not with an
   * https:// target (ALPN chooses there) nor with `http1`.
   */
  h2c?: boolean;
  /** An https:// target: HTTP/1.1 only, even if the backend offers h2 (`--http1`). */
  http1?: boolean;
  /** @internal Tests only: how long a dial to an HTTP/2 backend may take (default 10 s). */
  backendConnectTimeoutMs?: number;
  /**
   * Keep-alive PINGs on the HTTP/2 backend's sessions (`--h2c`, or h2 by ALPN): one after `intervalMs`
   * (default 310 s, within gRPC servers' 5 min PING policy) with nothing received; a PING unanswered for `timeoutMs` (default 20 s) gives the
   * session up, failing its requests (a gRPC call with UNAVAILABLE) so the next one dials anew. `false`
   * sends none. Programmatic only, no CLI flag.
   */
  backendKeepalive?: { intervalMs?: number; timeoutMs?: number } | false;
  /** Backend connections kept by the pool. */
  connections?: number;
  protocol?: Partial<ProtocolSettings>;
  /** @internal Tests only: the protocol versions offered (to play an older or newer agent). */
  protocolVersions?: VersionRange;
  /** Reconnect backoff. */
  reconnect?: { initialMs?: number; maxMs?: number };
  agentPath?: string;
  /** `user:password` the edge asks of every public request (HTTP Basic). */
  basicAuth?: string;
  /** Client addresses or CIDR blocks allowed to use the public URL. */
  allowIps?: string[];
  /**
   * The request inspector (web page and API on loopback). Off when absent or false; `{}` starts it on
   * 127.0.0.1, the first free port of 4040..4049 (else an ephemeral one).
   */
  inspect?: false | InspectOptions;
  /**
   * A TCP tunnel instead of an HTTP one (see connectTcp): the edge gives a public port and every
   * connection to it is carried to `target`. `remotePort` asks for a specific port of the edge's range.
   */
  tcp?: { remotePort?: number; connectTimeoutMs?: number };
}

export interface InspectOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default: the first free of 4040..4049, else an ephemeral port; 0: an ephemeral port. */
  port?: number;
  /** Bytes kept of each request and response body (default 1 MiB). */
  bodyLimit?: number;
  /** Bytes all captured entries together may hold (default 64 MiB). */
  budget?: number;
}

/** The edge an agent connects to when neither an option, TUNNEL2_SERVER nor a config file names one. */
export const DEFAULT_SERVER = 'http://localhost:8080';

/** An edge address the agent can connect to: an http(s):// URL (ws:// and wss:// too, as the socket takes them). */
export function isServerUrl(value: string): boolean {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return ['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol) && url.hostname !== '';
}

/** What a server address that is not a URL gets told (`localhost:8080` parses as a URL of scheme `localhost:`). */
export const SERVER_URL_EXPECTED = 'expected an http(s):// URL, e.g. http://localhost:8080';

/**
 * The edge to connect to, checked once: `server` (the --server option, or what a caller resolved), else
 * TUNNEL2_SERVER, else `fallback`. An address that is not a URL is a usage error naming where it came from:
 * retrying it could never work.
 */
export function resolveServer(server: string | undefined, fallback = DEFAULT_SERVER): string {
  const env = process.env.TUNNEL2_SERVER;
  const [source, value] =
    server !== undefined
      ? ['--server', server]
      : env !== undefined && env !== ''
        ? ['TUNNEL2_SERVER', env]
        : ['server', fallback];
  if (!isServerUrl(value)) {
    throw new AgentError(AgentErrorCode.INVALID_OPTION, `${source} "${value}": ${SERVER_URL_EXPECTED}`);
  }
  return value;
}

/** `user:password`, both non-empty: what HTTP Basic can carry (the user part has no colon). */
export function isBasicAuth(value: string): boolean {
  return /^[^:]+:.+$/.test(value);
}

/** The first entry of `list` that is neither an IP address nor a CIDR block, else undefined. */
export function firstInvalidIp(list: readonly string[]): string | undefined {
  return list.find((entry) => {
    const [address, prefix] = entry.split('/');
    const family = isIP(address ?? '');
    const max = family === 6 ? 128 : 32;
    return family === 0 || (prefix !== undefined && !(/^\d+$/.test(prefix) && Number(prefix) <= max));
  });
}

export function resolveHostHeader(value: string | undefined): HostHeaderMode {
  if (value === undefined || value === 'rewrite') return 'rewrite';
  if (value === 'preserve') return 'preserve';
  if (value.trim() === '' || /[\r\n\0]/.test(value)) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      `--host-header "${value}": expected rewrite, preserve or a host value`,
    );
  }
  return { value };
}

/** What the agent asks the edge to enforce on its public URL (only a hash of the password is sent). */
export function resolveProtection(
  options: Pick<ConnectOptions, 'basicAuth' | 'allowIps'>,
): Record<string, unknown> | undefined {
  const protect: Record<string, unknown> = {};
  if (options.basicAuth !== undefined) {
    if (!isBasicAuth(options.basicAuth)) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        '--basic-auth must be user:password (both non-empty)',
      );
    }
    protect.basicAuthSha256 = createHash('sha256').update(options.basicAuth).digest('hex');
  }
  if (options.allowIps !== undefined) {
    const bad = firstInvalidIp(options.allowIps);
    if (bad !== undefined) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        `--allow-ip "${bad}" is not an IP address or CIDR block`,
      );
    }
    protect.allowIps = options.allowIps;
  }
  return Object.keys(protect).length > 0 ? protect : undefined;
}

/** A TCP tunnel's own options, checked: it has no inspector, and its connect timeout is a positive integer. */
export function checkTcpOptions(options: ConnectOptions): void {
  if (options.inspect !== undefined && options.inspect !== false) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      'the inspector records HTTP requests: a TCP tunnel has none',
    );
  }
  const timeout = options.tcp?.connectTimeoutMs;
  if (timeout !== undefined && !(Number.isInteger(timeout) && timeout > 0)) {
    throw new AgentError(AgentErrorCode.INVALID_OPTION, 'tcp.connectTimeoutMs must be a positive integer');
  }
}
