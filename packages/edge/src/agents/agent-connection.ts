import {
  type CorkableStream,
  ErrorCode,
  type Hello,
  MAX_SESSION_TUNNELS,
  MuxSession,
  type MuxStream,
  negotiateVersion,
  ProtocolErrorCode,
  type ProtocolSettings,
  sendCorkedPieces,
  TCP_STREAM_KIND,
  TUNNEL_STREAM_KIND,
  Tunnel2Error,
  type WindowBudget,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { type CompiledProtection, compileProtection } from '../access/public-protection.js';
import type { ExtraTunnel } from './extra-tunnel.js';
import { StreamSlots, type StreamSlotsOptions } from './stream-slots.js';
import { TokenBucket } from './token-bucket.js';
import type { AgentSession } from './tunnel-entry.js';

/** ws's WebSocket.OPEN, without importing ws at run time here. */
const OPEN = 1;

/** The tunnels an agent listed in its HELLO, claimed: the entries that won, and one answer per ask. */
export interface ClaimedTunnels {
  entries: ExtraTunnel[];
  answers: Record<string, unknown>[];
}

export interface AgentConnectionOptions {
  name: string;
  epoch: number;
  owner: string;
  /** Whom the session counts against (agent-account.ts): the owner, or an anonymous agent's address. */
  account: string;
  socket: WebSocket;
  /** The stream beneath `socket`: corked while a message's fragments are written, so they leave in one write. */
  beneath?: CorkableStream;
  logger: Logger;
  protocol: Partial<ProtocolSettings>;
  /** Auto-tuning limit for response streams (MuxSessionOptions.maxStreamWindow). */
  maxStreamWindow: number;
  /** This session's growth budget, and the edge-wide one every session draws on. */
  sessionWindowBudget: number;
  edgeWindowBudget: WindowBudget;
  helloTimeoutMs: number;
  /** A request to an agent quiet for a second pings it; no answer within this ends the session (0: off). */
  probeTimeoutMs: number;
  /** This session's concurrent-stream limit and the bounded wait for a slot. */
  slots: StreamSlotsOptions;
  /** Requests per second this session accepts (0: unlimited), and the burst above it. */
  requestRate: number;
  requestBurst: number;
  /** Session info for the agent's HELLO answer (name, public URLs). */
  sessionInfo: Record<string, unknown>;
  /** The public TCP port this session serves, for a TCP tunnel. */
  tcpPort?: number | undefined;
  /** The agent's run id (`x-tunnel2-agent-run`), when it sent one (name-holder.ts). */
  run?: string | undefined;
  /** The agent asked to join its name as a replica (`replica=1` in the endpoint's URL). */
  replica?: boolean | undefined;
  /** Claims the tunnels an agent lists in its HELLO (`tunnels`); undefined: this edge takes none. */
  claimTunnels?: ((connection: AgentConnection, asks: unknown[]) => Promise<ClaimedTunnels>) | undefined;
  onReady: (connection: AgentConnection) => void;
  onClose: (connection: AgentConnection, error: Error | undefined) => void;
  /** The agent said GOAWAY: it takes no new requests from now on (its replica's place may go). */
  onGoingAway?: ((connection: AgentConnection) => void) | undefined;
}

/** One agent's WebSocket on the edge, and the multiplexed session running over it. */
export class AgentConnection implements AgentSession {
  readonly name: string;
  /** The session's own tunnel: its heads carry no tunnel tag. */
  readonly tag = 0;
  /** The tunnels the agent listed in its HELLO, once claimed (tags 1…n). */
  extras: ExtraTunnel[] = [];
  /** The registry epoch this connection holds the name under; a re-claim after a registry outage moves it. */
  epoch: number;
  readonly owner: string;
  readonly account: string;
  /** The public TCP port this session serves (a TCP tunnel), else undefined (an HTTP tunnel). */
  readonly tcpPort: number | undefined;
  readonly session: MuxSession;
  readonly connectedAt = Date.now();
  /** The agent run's id, when it sent one: its reconnects take its names over, another run's are refused. */
  readonly run: string | undefined;
  /** Joined its name as a replica: other agents of its owner may serve the name beside it. */
  readonly replica: boolean;
  /**
   * The agent said GOAWAY(GOING_AWAY): it is shutting down (Ctrl-C, SIGTERM, `tunnel.close()`), not coming
   * back. Its names and ports are released at once when the session ends, without the reconnect grace.
   */
  leaving = false;
  /** Basic auth and IP allow-list the agent asked the edge to enforce on its public URL. */
  protection: CompiledProtection | undefined;
  /** The agent said `http2` in its HELLO (gRPC calls may go to it). */
  http2 = false;
  /** What the agent calls itself in its HELLO. */
  agent: string | undefined;
  /** Stream slots, and requests waiting for one. */
  readonly slots: StreamSlots;
  /** The session's request rate limit, when one is configured. */
  readonly rate: TokenBucket | undefined;
  readonly #socket: WebSocket;
  readonly #log: Logger;
  readonly #options: AgentConnectionOptions;
  #helloTimer: NodeJS.Timeout | undefined;
  /** The replica count the agent was last told (at HELLO or in a NOTICE). */
  #replicasTold: unknown;
  /** Set once handing over: the reason the connection closes with when its streams are done. */
  #handOver: string | undefined;

  /** 'agent connected' was logged: its end is logged too. */
  #connected = false;

  constructor(options: AgentConnectionOptions) {
    this.name = options.name;
    this.epoch = options.epoch;
    this.owner = options.owner;
    this.account = options.account;
    this.tcpPort = options.tcpPort;
    this.run = options.run;
    this.replica = options.replica === true;
    this.#socket = options.socket;
    this.#options = options;
    this.#log = options.logger.child({ session: options.name, epoch: options.epoch });
    const socket = options.socket;
    this.session = new MuxSession({
      role: 'edge',
      settings: options.protocol,
      maxStreamWindow: options.maxStreamWindow,
      sessionWindowBudget: options.sessionWindowBudget,
      sharedWindowBudget: options.edgeWindowBudget,
      probeTimeoutMs: options.probeTimeoutMs,
      // Every agent pings at the agreed interval; answering it is enough for both sides to hear each other,
      // which halves what idle sessions cost the edge (nothing here shows the round trip after startup).
      skipPingWhenPinged: true,
      transport: {
        sendPieces: (pieces, _size, done) => {
          // The agent's close frame has arrived (it said GOING_AWAY and closed): what is left to send has no
          // reader. The session ends now, without an error: handed to ws, the write would fail and end it with
          // that error, a warning on every graceful agent exit. Now, not at the socket's 'close', which comes
          // a round trip later: a graceful close frees the agent's names before its close() has resolved.
          if (socket.readyState !== OPEN) {
            process.nextTick(() => {
              this.session.transportClosed();
              done();
            });
            return;
          }
          sendCorkedPieces(socket, options.beneath, pieces, done);
        },
        close: (code, reason) => socket.close(code, reason),
      },
      handler: {
        onHello: (hello) => this.#onHello(hello),
        onGoAway: (goAway) => {
          this.#log.info({ code: goAway.code, reason: goAway.reason }, 'agent is going away');
          // Every agent version sends GOING_AWAY only from its close(); any other code is an error.
          if (goAway.code === ErrorCode.GOING_AWAY) this.leaving = true;
          this.slots.close();
          options.onGoingAway?.(this);
        },
        onStreamError: (stream, err) => this.#log.error({ err, stream: stream.id }, 'stream handler failed'),
        onStreamClosed: () => this.slots.release(),
        onIdle: () => {
          // Handing over (a draining cluster node): gone as soon as its last stream is, after the frame
          // that ended it has been handled.
          const reason = this.#handOver;
          if (reason !== undefined) setImmediate(() => this.close(ErrorCode.GOING_AWAY, reason));
        },
        onClose: (error) => {
          if (this.#helloTimer) clearTimeout(this.#helloTimer);
          this.slots.close();
          if (Tunnel2Error.isTunnel2Error(error) && error.code === ProtocolErrorCode.FLOOD) {
            // A peer that provokes answers it does not read, or sends frames that carry nothing.
            this.#log.warn({ err: error, code: error.code }, 'agent session closed: flood protection');
          } else if (error) this.#log.warn({ err: error }, 'agent session ended');
          else if (this.#connected) {
            // The pair of 'agent connected': an operator reading the log sees each session end, and how.
            this.#log.info({ graceful: this.leaving }, this.leaving ? 'agent closed' : 'agent disconnected');
          }
          options.onClose(this, error);
        },
      },
    });
    this.slots = new StreamSlots(this.session, options.slots);
    this.rate =
      options.requestRate > 0 ? new TokenBucket(options.requestRate, options.requestBurst) : undefined;
    // Fragments, not joined messages: the session decodes them in place (no copy of a message spanning reads).
    socket.binaryType = 'fragments';
    socket.on('message', (data, isBinary) => {
      if (!isBinary) {
        this.session.close(ErrorCode.PROTOCOL_ERROR, 'text messages are not part of the protocol');
        return;
      }
      this.session.receive(data as Buffer[]);
    });
    socket.on('close', () => this.session.transportClosed());
    socket.on('error', (err) => {
      this.#log.warn({ err }, 'agent socket error');
      this.session.transportClosed(err);
    });
    this.#helloTimer = setTimeout(() => {
      this.session.close(ErrorCode.PROTOCOL_ERROR, `no HELLO within ${options.helloTimeoutMs} ms`);
    }, options.helloTimeoutMs);
    this.#helloTimer.unref();
  }

  get ready(): boolean {
    return this.session.ready;
  }

  get connection(): AgentConnection {
    return this;
  }

  /** Opens a request stream; throws a ProtocolError with TOO_MANY_STREAMS or SESSION_CLOSED. */
  openStream(): MuxStream {
    return this.session.openStream();
  }

  /** Graceful: no new requests, in-flight ones finish. */
  drain(reason: string): void {
    this.session.goAway(ErrorCode.GOING_AWAY, reason);
    this.slots.close();
  }

  /**
   * Drains, then closes as soon as its own streams are done, not when the whole node is idle: in a cluster
   * the agent reconnects to another node only once this connection closes, and requests waiting for it to
   * reappear there would otherwise hold this node, and the agent, until they time out.
   */
  handOver(reason: string): void {
    this.drain(reason);
    this.#handOver = reason;
    if (this.session.streams.size === 0) this.close(ErrorCode.GOING_AWAY, reason);
  }

  close(code: number = ErrorCode.NO_ERROR, reason = 'closed by edge'): void {
    this.session.close(code, reason);
  }

  #onHello(hello: Hello): void {
    if (this.#helloTimer) clearTimeout(this.#helloTimer);
    try {
      negotiateVersion(hello);
    } catch (err) {
      const code = Tunnel2Error.isTunnel2Error(err) ? err.code : 'unknown';
      this.#log.warn({ code }, 'agent protocol version unsupported');
      this.session.close(
        ErrorCode.VERSION_UNSUPPORTED,
        err instanceof Error ? err.message : 'version unsupported',
      );
      return;
    }
    // TCP streams go only to an agent that said it takes them: an older one would refuse each of them.
    const kinds = hello.meta.streamKinds;
    if (this.tcpPort !== undefined && !(Array.isArray(kinds) && kinds.includes(TCP_STREAM_KIND))) {
      this.session.close(ErrorCode.PROTOCOL_ERROR, 'a TCP tunnel needs an agent that announces TCP streams');
      return;
    }
    const protection = compileProtection(hello.meta.protect);
    if (protection !== undefined && 'error' in protection) {
      this.session.close(ErrorCode.PROTOCOL_ERROR, `invalid public URL protection: ${protection.error}`);
      return;
    }
    this.protection = protection;
    this.http2 = hello.meta.http2 === true;
    this.agent = typeof hello.meta.agent === 'string' ? hello.meta.agent.slice(0, 100) : undefined;
    const asks = hello.meta.tunnels;
    if (asks === undefined || this.#options.claimTunnels === undefined) {
      this.#answer(hello, undefined);
      return;
    }
    // Tagged heads go only to an agent that said it reads them; the list is bounded before any claim.
    if (!(Array.isArray(asks) && Array.isArray(kinds) && kinds.includes(TUNNEL_STREAM_KIND))) {
      this.session.close(ErrorCode.PROTOCOL_ERROR, 'tunnels needs an array and "tunnel" in streamKinds');
      return;
    }
    if (asks.length > MAX_SESSION_TUNNELS) {
      this.session.close(
        ErrorCode.PROTOCOL_ERROR,
        `at most ${MAX_SESSION_TUNNELS} tunnels per session besides its own (asked for ${asks.length})`,
      );
      return;
    }
    this.#options.claimTunnels(this, asks).then(
      (claimed) => {
        this.extras = claimed.entries;
        // Closed while the names were claimed: onClose has run, the endpoint releases what it claimed.
        if (!this.session.closed) this.#answer(hello, claimed.answers);
      },
      (err: unknown) => {
        this.#log.error({ err }, 'claiming the listed tunnels failed');
        this.session.close(ErrorCode.INTERNAL_ERROR, 'the session registry is unavailable, retry shortly');
      },
    );
  }

  /**
   * Tells the agent of a replica how many agents serve its name now (a NOTICE, once per change; PROTOCOL.md
   * §8): its status follows joins and leaves. An agent older than NOTICE skips it.
   */
  tellReplicas(count: number): void {
    if (!this.replica || count === this.#replicasTold || !this.#connected) return;
    this.#replicasTold = count;
    this.session.sendNotice({ replicas: count });
  }

  #answer(hello: Hello, tunnels: Record<string, unknown>[] | undefined): void {
    // `http2`: this edge serves HTTP/2 and gRPC to public clients (an agent with an HTTP/2 backend warns
    // when its edge does not say so).
    this.session.sendHello(
      { ...this.#options.sessionInfo, http2: true, ...(tunnels ? { tunnels } : {}) },
      true,
    );
    this.#log.info({ agent: hello.meta.agent, tunnels: tunnels?.length }, 'agent connected');
    this.#connected = true;
    this.#replicasTold = this.#options.sessionInfo.replicas;
    this.#options.onReady(this);
  }
}
