import {
  ErrorCode,
  type Hello,
  MuxSession,
  type MuxStream,
  negotiateVersion,
  ProtocolErrorCode,
  type ProtocolSettings,
  TCP_STREAM_KIND,
  Tunnel2Error,
  type WindowBudget,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { type CompiledProtection, compileProtection } from './public-protection.js';
import { StreamSlots, type StreamSlotsOptions } from './stream-slots.js';
import { TokenBucket } from './token-bucket.js';

export interface AgentConnectionOptions {
  name: string;
  epoch: number;
  owner: string;
  socket: WebSocket;
  logger: Logger;
  protocol: Partial<ProtocolSettings>;
  /** Auto-tuning limit for response streams (MuxSessionOptions.maxStreamWindow). */
  maxStreamWindow: number;
  /** This session's growth budget, and the edge-wide one every session draws on. */
  sessionWindowBudget: number;
  edgeWindowBudget: WindowBudget;
  helloTimeoutMs: number;
  /** This session's concurrent-stream limit and the bounded wait for a slot. */
  slots: StreamSlotsOptions;
  /** Requests per second this session accepts (0: unlimited), and the burst above it. */
  requestRate: number;
  requestBurst: number;
  /** Session info for the agent's HELLO answer (name, public URLs). */
  sessionInfo: Record<string, unknown>;
  /** The public TCP port this session serves, for a TCP tunnel. */
  tcpPort?: number | undefined;
  onReady: (connection: AgentConnection) => void;
  onClose: (connection: AgentConnection, error: Error | undefined) => void;
}

/** One agent's WebSocket on the edge, and the multiplexed session running over it. */
export class AgentConnection {
  readonly name: string;
  /** The registry epoch this connection holds the name under; a re-claim after a registry outage moves it. */
  epoch: number;
  readonly owner: string;
  /** The public TCP port this session serves (a TCP tunnel), else undefined (an HTTP tunnel). */
  readonly tcpPort: number | undefined;
  readonly session: MuxSession;
  readonly connectedAt = Date.now();
  /** Basic auth and IP allow-list the agent asked the edge to enforce on its public URL. */
  protection: CompiledProtection | undefined;
  /** Stream slots, and requests waiting for one. */
  readonly slots: StreamSlots;
  /** The session's request rate limit, when one is configured. */
  readonly rate: TokenBucket | undefined;
  readonly #socket: WebSocket;
  readonly #log: Logger;
  readonly #options: AgentConnectionOptions;
  #helloTimer: NodeJS.Timeout | undefined;
  /** Set once handing over: the reason the connection closes with when its streams are done. */
  #handOver: string | undefined;

  constructor(options: AgentConnectionOptions) {
    this.name = options.name;
    this.epoch = options.epoch;
    this.owner = options.owner;
    this.tcpPort = options.tcpPort;
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
      transport: {
        send: (message, done) => socket.send(message, { binary: true, compress: false }, done),
        close: (code, reason) => socket.close(code, reason),
      },
      handler: {
        onHello: (hello) => this.#onHello(hello),
        onGoAway: (goAway) => {
          this.#log.info({ code: goAway.code, reason: goAway.reason }, 'agent is going away');
          this.slots.close();
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
          options.onClose(this, error);
        },
      },
    });
    this.slots = new StreamSlots(this.session, options.slots);
    this.rate =
      options.requestRate > 0 ? new TokenBucket(options.requestRate, options.requestBurst) : undefined;
    socket.on('message', (data, isBinary) => {
      if (!isBinary) {
        this.session.close(ErrorCode.PROTOCOL_ERROR, 'text messages are not part of the protocol');
        return;
      }
      this.session.receive(data as Buffer);
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
    this.session.sendHello(this.#options.sessionInfo, true);
    this.#log.info({ agent: hello.meta.agent }, 'agent connected');
    this.#options.onReady(this);
  }
}
