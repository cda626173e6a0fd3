import { EventEmitter } from 'node:events';
import type { Inspector } from '@tunnel2/inspector';
import { ANY_TCP_PORT } from '@tunnel2/protocol';
import { type Logger, pino } from 'pino';
import { AgentError, AgentErrorCode } from '../errors.js';
import { forwardHeaders } from '../forwarding/forward-exchange.js';
import type { HostHeaderMode, RequestReport } from '../forwarding/forward-options.js';
import type { BackendProtocol } from '../forwarding/http2/h2-backend.js';
import type { HttpForwarding, TcpForwarding } from '../forwarding/stream-dispatch.js';
import { parseTcpTarget, type Target, type TcpTarget, tcpTargetLabel } from '../forwarding/target.js';
import { serverNameOf } from '../forwarding/target-tls.js';
import type { TcpConnectionReport } from '../forwarding/tcp-forward.js';
import { VERSION } from '../version.js';
import {
  type ConnectedSession,
  connectSession,
  type ExtraTunnelAnswer,
  type ExtraTunnelAsk,
  type SessionInfo,
  type SessionStats,
} from './agent-session.js';
import { backoffDelay } from './backoff.js';
import {
  type ConnectOptions,
  checkTcpOptions,
  resolveHostHeader,
  resolveProtection,
  resolveServer,
} from './connect-options.js';
import { earlyBytesHint, type Hint, noHttp2Hint } from './edge-hints.js';
import { closeHttpBackend, type HttpBackend, openHttpBackend, probeHttpBackend } from './http-backend.js';
import type { RefusalContext } from './refusal-message.js';
import { startInspector } from './tunnel-inspector.js';
import { refusedTunnels } from './tunnel-refusals.js';

// Not an `import`: an ESM import of node:crypto reads every export, and its `webcrypto` getter loads Web
// Crypto, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { randomUUID } = process.getBuiltinModule('node:crypto');

export interface ReconnectingEvent {
  attempt: number;
  delayMs: number;
  reason: string;
}

export interface TunnelEvents {
  ready: [SessionInfo];
  /** A replica: the number of agents serving its name changed (the edge's NOTICE); `info.replicas` has it. */
  replicas: [number];
  request: [RequestReport];
  /** A TCP tunnel's connection ended. */
  connection: [TcpConnectionReport];
  reconnecting: [ReconnectingEvent];
  error: [AgentError];
  /** Advice that changes nothing by itself (`code`: a stable TUNNEL2_HINT_* name), e.g. an edge to upgrade. */
  hint: [Hint];
  /** Once, when the tunnel has let go of everything: after close(), or a refusal that ended it. */
  close: [];
}

// The edge's codes for a TCP port it cannot give (taken, or outside its range), a name another owner holds.
const TCP_PORT_UNAVAILABLE = 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE';
const NAME_IN_USE = 'TUNNEL2_ERR_NAME_IN_USE';

export { EDGE_NO_HTTP2_HINT } from './edge-hints.js';

/** A drained session that lasted at least this long reconnects without the backoff's first pause. */
const IMMEDIATE_RECONNECT_AFTER_MS = 1_000;

/**
 * A tunnel that stays up: one session at a time, reconnecting with jittered exponential backoff and
 * asking for the same name, until `close()` or a refusal that retrying cannot fix.
 */
export class Tunnel extends EventEmitter<TunnelEvents> {
  /** Where requests go; for a TCP tunnel, origin `tcp://host:port` and no base path. */
  readonly target: Target;
  /** The edge this tunnel connects to, as resolved once (option, else TUNNEL2_SERVER, else the default). */
  readonly server: string;
  info: SessionInfo | undefined;
  readonly #options: ConnectOptions;
  /** An HTTP tunnel's backend pool and queue; a TCP tunnel's target (it has neither). */
  readonly #kind: HttpBackend | { tcp: TcpTarget };
  /** The edge was told about this HTTP/2 backend's lack of HTTP/2 at the edge once: not on every reconnect. */
  #warnedNoHttp2 = false;
  /** Said once per run, not at every upgrade: the edge sends too many early bytes (it is older than us). */
  #warnedEarlyBytes = false;
  /** Whether the edge of the current session said `http2` (undefined before the first ready). */
  #edgeHttp2: boolean | undefined;
  readonly #logger: Logger;
  readonly #agentKey: string;
  /** This Tunnel's own id: the edge tells its reconnects from another run that holds the same key. */
  readonly #agentRun = randomUUID();
  readonly #hostHeader: HostHeaderMode;
  readonly #protect: Record<string, unknown> | undefined;
  #session: ConnectedSession | undefined;
  #closing = false;
  #wake: (() => void) | undefined;
  /** The connect under way, if any: close() cancels it rather than wait for an edge that may never answer. */
  #connecting: AbortController | undefined;
  #loop: Promise<void> | undefined;
  #inspector: Inspector | undefined;
  #released: Promise<void> | undefined;
  /** The tunnels this one's session also carries (connectMany); they never connect on their own. */
  readonly #extras: readonly Tunnel[];
  /** An extra tunnel's name and TCP port as last granted, asked for again on a reconnect. */
  #granted: { name?: string; port?: number } = {};

  /** `extras`: more tunnels carried over this tunnel's session (see connectMany). */
  constructor(options: ConnectOptions, extras: readonly Tunnel[] = []) {
    super();
    this.#options = options;
    this.#extras = extras;
    this.#agentKey = options.agentKey ?? randomUUID();
    this.server = resolveServer(options.server);
    this.#hostHeader = resolveHostHeader(options.hostHeader);
    this.#protect = resolveProtection(options);
    this.#logger = options.logger ?? pino({ level: 'silent' });
    const joinsNothing =
      options.tcp === undefined ? options.subdomain === undefined : options.tcp.remotePort === undefined;
    if (options.replica === true && joinsNothing) {
      // Replicas serve one name (HTTP) or one public port (TCP) together: a random one cannot be joined.
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        options.tcp !== undefined
          ? '--replica needs --remote-port: TCP replicas share one public port'
          : '--replica needs --subdomain: replicas join one name',
      );
    }
    if (options.tcp !== undefined) {
      checkTcpOptions(options);
      const tcp = parseTcpTarget(String(options.target));
      const label = tcpTargetLabel(tcp);
      this.target = { origin: `tcp://${label}`, host: label, basePath: '' };
      this.#kind = { tcp };
      return;
    }
    const http = openHttpBackend(options, () => {
      // Learnt at a request when the backend was not up at start: the hint may be due only now.
      if (this.#edgeHttp2 !== undefined) this.#adviseOnEdge(this.#edgeHttp2);
    });
    this.target = http.target;
    this.#kind = http.kind;
  }

  /**
   * What this tunnel speaks to its backend: `h2c`, `h2` (an https:// target that chose it by ALPN) or
   * `http/1.1`; undefined for an https:// target not reached yet, and for a TCP tunnel.
   */
  get backendProtocol(): BackendProtocol | undefined {
    if (!('pool' in this.#kind)) return undefined;
    return this.#kind.h2 === undefined ? 'http/1.1' : this.#kind.h2.protocol;
  }

  /** For an https:// target offered h2: one handshake to learn the backend's choice (bounded, never fails). */
  async #probeBackend(): Promise<void> {
    const h2 = 'pool' in this.#kind ? this.#kind.h2 : undefined;
    if (h2 === undefined || h2.protocol !== undefined) return;
    await probeHttpBackend(h2, serverNameOf(forwardHeaders([], this.target, this.#hostHeader)));
  }

  /**
   * After each ready: an HTTP/2 backend behind an edge whose HELLO ACK did not say `http2` (it predates
   * HTTP/2) cannot be reached by gRPC or HTTP/2 clients; said once per run, naming the edge.
   */
  #adviseOnEdge(edgeHttp2: boolean): void {
    this.#edgeHttp2 = edgeHttp2;
    const protocol = this.backendProtocol;
    if (edgeHttp2 || this.#warnedNoHttp2 || (protocol !== 'h2c' && protocol !== 'h2')) return;
    this.#warnedNoHttp2 = true;
    this.emit('hint', noHttp2Hint(this.server, protocol));
  }

  get url(): string | undefined {
    return this.info?.url;
  }

  /** The live session's round trip, open streams and drain state; undefined between sessions. */
  get sessionStats(): SessionStats | undefined {
    return this.#session?.stats();
  }

  /** The tunnel's name in its config file, when it has one. */
  get label(): string | undefined {
    return this.#options.label;
  }

  /** Where this tunnel was asked for (its config file's name and key), for what its refusals advise. */
  #refusalContext(): RefusalContext {
    return {
      label: this.#options.label,
      configFile: this.#options.configFile,
      replica: this.#options.replica === true,
    };
  }

  /** Every tunnel of this session: this one first, then those connectMany put beside it. */
  get tunnels(): readonly Tunnel[] {
    return [this, ...this.#extras];
  }

  /** What this tunnel asks of the edge when another tunnel's session carries it (HELLO `tunnels`). */
  #extraAsk(): ExtraTunnelAsk {
    const name = this.#granted.name ?? this.#options.subdomain?.toLowerCase();
    const port = this.#granted.port ?? this.#options.tcp?.remotePort;
    return {
      ask: { name, tcp: this.#options.tcp && (port ?? ANY_TCP_PORT), protect: this.#protect },
      forwarding: this.#forwarding(port),
    };
  }

  /**
   * After the edge refused some listed tunnels: when each refusal is a TCP port this session had before
   * and the user never named (taken while it was away), those tunnels forget it and will ask for any port,
   * as the session's own tunnel does. False when any refusal is one retrying cannot fix.
   */
  #forgetTakenPorts(answers: readonly ExtraTunnelAnswer[]): boolean {
    const refused = this.#extras.flatMap((extra, i) => {
      const answer = answers[i];
      return answer !== undefined && 'error' in answer ? [{ extra, code: answer.error.code }] : [];
    });
    const forgivable = refused.every(
      ({ extra, code }) =>
        code === TCP_PORT_UNAVAILABLE &&
        extra.#granted.port !== undefined &&
        extra.#options.tcp?.remotePort === undefined,
    );
    if (!forgivable) return false;
    for (const { extra } of refused) {
      this.#logger.warn(
        { tunnel: extra.label, port: extra.#granted.port },
        'the previous TCP port is taken; asking for another',
      );
      extra.#granted = { name: extra.#granted.name };
    }
    return true;
  }

  /** The inspector's page and API (`http://127.0.0.1:4040`), once started; undefined when it is off. */
  get inspectorUrl(): string | undefined {
    return this.#inspector?.url;
  }

  /** Starts the inspector when asked for (before the first session, so no request goes unrecorded). */
  async #startInspector(): Promise<void> {
    const inspect = this.#options.inspect;
    if (inspect === undefined || inspect === false || this.#inspector !== undefined) return;
    this.#inspector = await startInspector(inspect, this.target, this.#hostHeader, this.#kind);
    this.on('ready', (info) => this.#inspector?.setPublicUrl(info.url, info.name, info.replicas));
    this.on('replicas', () => {
      const info = this.info;
      if (info !== undefined) this.#inspector?.setPublicUrl(info.url, info.name, info.replicas);
    });
  }

  /**
   * Starts the connect loop and resolves at the first `ready`. It rejects if the first attempt is refused
   * for good, or, with `failFast`, if it fails at all (then the loop stops); later drops always reconnect.
   */
  async start(options: { failFast?: boolean } = {}): Promise<SessionInfo> {
    try {
      for (const tunnel of this.tunnels) await tunnel.#startInspector();
      for (const tunnel of this.tunnels) await tunnel.#probeBackend();
    } catch (err) {
      await this.#release();
      throw err;
    }
    if (this.#closing) {
      // close() came while the inspector started, and released what existed then.
      await this.#inspector?.close();
      throw new AgentError(AgentErrorCode.CLOSED, 'the tunnel was closed before it started');
    }
    return new Promise((resolve, reject) => {
      const onReady = (info: SessionInfo): void => {
        this.off('error', onError);
        resolve(info);
      };
      const onError = (error: AgentError): void => {
        if (!error.fatal && !options.failFast) return;
        this.off('error', onError);
        this.off('ready', onReady);
        if (!error.fatal) void this.close(0);
        reject(error);
      };
      this.once('ready', onReady);
      this.on('error', onError);
      this.#loop = this.#run();
      // Closed before any ready (during the first connect, or its backoff): said, rather than never settled.
      const ended = (err?: unknown): void => {
        this.off('error', onError);
        this.off('ready', onReady);
        reject(err ?? new AgentError(AgentErrorCode.CLOSED, 'the tunnel was closed before it started'));
      };
      this.#loop.then(() => ended(), ended);
    });
  }

  /**
   * Graceful: stops taking requests, lets in-flight ones finish (up to graceMs), closes. Called again with
   * 0 while a graceful close waits (a second Ctrl-C), it cuts what is still in flight now.
   */
  async close(graceMs = 5_000): Promise<void> {
    if (!this.#closing) {
      this.#closing = true;
      this.#wake?.();
      this.#connecting?.abort();
      await this.#session?.close(graceMs);
    } else if (graceMs === 0) {
      await this.#session?.close(0);
    }
    // The loop releases everything as it ends; a tunnel never started has only its pool to let go.
    await (this.#loop ?? this.#release());
  }

  /** Frees the backend queue and pool and the inspector, once, whichever way the tunnel ended. */
  #release(): Promise<void> {
    this.#released ??= (async () => {
      if ('pool' in this.#kind) await closeHttpBackend(this.#kind);
      await this.#inspector?.close();
      for (const extra of this.#extras) await extra.#release();
      this.emit('close');
    })();
    return this.#released;
  }

  async #run(): Promise<void> {
    try {
      await this.#connectLoop();
    } finally {
      // Also after a refusal that ended it: nothing may keep the process alive once the tunnel is done.
      await this.#release();
    }
  }

  #forwarding(remotePort: number | undefined): { http: HttpForwarding } | { tcp: TcpForwarding } {
    const kind = this.#kind;
    if ('tcp' in kind) {
      return {
        tcp: {
          remotePort,
          target: kind.tcp,
          connectTimeoutMs: this.#options.tcp?.connectTimeoutMs,
          onConnection: (report) => this.emit('connection', report),
        },
      };
    }
    return {
      http: {
        backend: kind.backend,
        target: this.target,
        hostHeader: this.#hostHeader,
        onReport: (report) => this.emit('request', report),
        onEarlyBytesOverLimit: () => {
          if (this.#warnedEarlyBytes) return;
          this.#warnedEarlyBytes = true;
          this.emit('hint', earlyBytesHint(this.info?.name ?? this.target.host, this.server));
        },
        capture: this.#inspector?.capture,
        h2: kind.h2,
      },
    };
  }

  async #connectLoop(): Promise<void> {
    let attempt = 0;
    let name = this.#options.subdomain?.toLowerCase();
    // The port the user asked for, kept apart from the one the edge gave: a TCP tunnel asks for the port
    // it had on every reconnect (it is its owner's, like a name), but only one the user named is a must.
    const requestedPort = this.#options.tcp?.remotePort;
    let grantedPort: number | undefined;
    while (!this.#closing) {
      let reason: string;
      let immediate = false;
      const connecting = new AbortController();
      this.#connecting = connecting;
      try {
        const session = await connectSession({
          signal: connecting.signal,
          server: this.server,
          agentPath: this.#options.agentPath ?? '/_tunnel2/connect',
          name,
          token: this.#options.token ?? process.env.TUNNEL2_TOKEN,
          agentKey: this.#agentKey,
          agentRun: this.#agentRun,
          replica: this.#options.replica === true,
          protocol: this.#options.protocol ?? {},
          logger: this.#logger,
          version: VERSION,
          protect: this.#protect,
          handshakeTimeoutMs: 10_000,
          versions: this.#options.protocolVersions,
          refusal: this.#refusalContext(),
          ...this.#forwarding(grantedPort ?? requestedPort),
          ...(this.#extras.length > 0 ? { extras: this.#extras.map((extra) => extra.#extraAsk()) } : {}),
        });
        this.#connecting = undefined;
        if (this.#closing) {
          await session.close(0);
          break;
        }
        const refused = refusedTunnels(
          session.extras,
          this.#extras.map((t) => t.#refusalContext()),
        );
        if (refused !== undefined) {
          await session.close(0);
          if (this.#forgetTakenPorts(session.extras)) {
            this.emit('reconnecting', { attempt, delayMs: 0, reason: refused.message });
            continue;
          }
          throw refused;
        }
        this.#session = session;
        this.info = session.info;
        name = session.info.name;
        grantedPort = session.info.tcp?.port ?? grantedPort;
        attempt = 0;
        const upSince = performance.now();
        this.emit('ready', session.info);
        session.onReplicas = (count) => this.emit('replicas', count);
        this.#adviseOnEdge(session.edgeHttp2);
        for (const [i, extra] of this.#extras.entries()) {
          const answer = session.extras[i];
          if (answer === undefined || !('info' in answer)) continue;
          extra.info = answer.info;
          extra.#granted = { name: answer.info.name, port: answer.info.tcp?.port };
          extra.emit('ready', answer.info);
          extra.#adviseOnEdge(session.edgeHttp2);
        }
        const error = await session.closed;
        this.#session = undefined;
        if (this.#closing) break;
        if (error instanceof AgentError && error.fatal) {
          this.emit('error', error);
          this.#closing = true;
          break;
        }
        reason = error?.message ?? 'connection closed';
        // Only after a session that stayed up a while: an edge that hands every new session straight
        // back must not turn this into a reconnect loop without a pause.
        immediate =
          error instanceof AgentError &&
          error.code === AgentErrorCode.EDGE_GOING_AWAY &&
          performance.now() - upSince >= IMMEDIATE_RECONNECT_AFTER_MS;
      } catch (err) {
        this.#connecting = undefined;
        // Closed meanwhile (the connect cancelled, or failing as it was): nothing to report or retry.
        if (this.#closing) break;
        const error =
          err instanceof AgentError
            ? err
            : new AgentError(AgentErrorCode.EDGE_UNREACHABLE, String(err), { cause: err });
        if (this.#options.subdomain === undefined && name !== undefined && error.edgeCode === NAME_IN_USE) {
          // The random name it had was taken while it was away (its grace ran out, and whoever saw the
          // public URL claimed it). The user asked for none, so a new random one will do: the next
          // 'ready' announces the new address, as for a TCP port below.
          this.#logger.warn({ name }, 'the previous name is taken; asking for a new one');
          name = undefined;
          this.emit('reconnecting', { attempt, delayMs: 0, reason: error.message });
          continue;
        }
        if (
          requestedPort === undefined &&
          grantedPort !== undefined &&
          error.edgeCode === TCP_PORT_UNAVAILABLE
        ) {
          // The port it had was taken while it was away (an edge restart, a grace that ran out). The user
          // asked for none, so any will do: the next 'ready' announces the new address.
          this.#logger.warn({ port: grantedPort }, 'the previous TCP port is taken; asking for another');
          grantedPort = undefined;
          this.emit('reconnecting', { attempt, delayMs: 0, reason: error.message });
          continue;
        }
        this.emit('error', error);
        if (error.fatal) {
          this.#closing = true;
          break;
        }
        reason = error.message;
      }
      if (this.#closing) break;
      // A drained session is a hand-over, not a failure: requests for the name are waiting for it to
      // reappear (on this edge once restarted, or on another node), so the first attempt goes at once.
      const delayMs = immediate
        ? 0
        : backoffDelay(attempt++, {
            initialMs: this.#options.reconnect?.initialMs ?? 500,
            maxMs: this.#options.reconnect?.maxMs ?? 30_000,
          });
      this.emit('reconnecting', { attempt, delayMs, reason });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }
}
