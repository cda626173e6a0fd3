import type { GoAway } from '../codec/control-frames.js';
import type { Hello } from '../codec/hello.js';
import type { FloodLimits, ProtocolSettings } from '../config.js';
import type { MuxStream } from './mux-stream.js';
import type { WindowBudget } from './window-budget.js';

// What a MuxSession is given (its transport, its handler, its options): the contract between the protocol
// package and the edge or agent that owns a session.

interface TransportClose {
  /** Closes the pipe; the owner reports back with `session.transportClosed()`. */
  close(code: number, reason: string): void;
}

/** A pipe that takes each message as one buffer. */
export interface MessageTransport extends TransportClose {
  /**
   * Sends one binary message; `done` runs once the bytes have left this process or the send failed.
   * The session reuses the message's memory after `done`, so the transport must not keep it.
   */
  send(message: Buffer, done: (error?: Error | null) => void): void;
}

/** A pipe that takes each message as pieces, so that large payloads need no copy (a WebSocket: fragments). */
export interface PieceTransport extends TransportClose {
  /**
   * Sends one binary message: `pieces` joined in order, `size` bytes in all. Frame headers and small
   * payloads come copied; each payload of 8 KiB or more is the chunk its producer wrote (a view, never
   * copied). `done` as for `send`; the transport must not keep the pieces after it.
   */
  sendPieces(pieces: readonly Buffer[], size: number, done: (error?: Error | null) => void): void;
}

/** The byte pipe under a session (a WebSocket in practice). The protocol package knows nothing more of it. */
export type FrameTransport = MessageTransport | PieceTransport;

export interface SessionHandler {
  /** The peer's HELLO (its settings are already applied). `ack` is true on the answer to ours. */
  onHello(hello: Hello, ack: boolean): void;
  /** The peer opened a stream; set `stream.handler` before returning. */
  onStream?(stream: MuxStream): void;
  onGoAway?(goAway: GoAway): void;
  /**
   * The peer's NOTICE: session metadata that changed since HELLO (PROTOCOL.md §8), as a JSON object. One
   * that does not parse as an object is skipped, as an unknown frame is.
   */
  onNotice?(meta: Record<string, unknown>): void;
  /**
   * A handler threw while processing a stream; the stream was reset with INTERNAL_ERROR and its handler
   * heard onReset. (A ProtocolError from a handler resets with its own wire code and is not reported here.)
   */
  onStreamError?(stream: MuxStream, error: unknown): void;
  /** Called once, when the session is over (cleanly: no error). */
  onClose(error: Error | undefined): void;
  /** The last open stream closed (lets a draining owner close without polling). */
  onIdle?(): void;
  /** A stream closed and its slot is free (lets an owner queue requests for a slot without polling). */
  onStreamClosed?(stream: MuxStream): void;
}

export type SessionRole = 'edge' | 'agent';

export interface MuxSessionOptions {
  /** The edge opens request streams (odd ids); the agent's ids are even. */
  role: SessionRole;
  transport: FrameTransport;
  handler: SessionHandler;
  /** What we accept from the peer; announced in our HELLO. */
  settings?: Partial<ProtocolSettings>;
  /** Bytes handed to the transport and not yet flushed before streams are told to pause. */
  highWaterMark?: number;
  /** Largest WebSocket message the batcher builds. */
  maxMessageSize?: number;
  /**
   * Largest receive window a stream grows to by auto-tuning (bytes). A stream starts at the
   * initialStreamWindow we announce; when its consumer takes a whole window in less than two round
   * trips (the sender is waiting for credit, not for us), the next WINDOW_UPDATE doubles it, up to this
   * and to what the budgets have left; a window that took more than eight round trips halves again.
   * Default 16 MiB (config.ts defaultWindowTuning); at most initialStreamWindow: exact windows.
   */
  maxStreamWindow?: number;
  /**
   * Growth this session's streams may hold together above their initial windows (bytes), and what the
   * session window grows by once HELLO is done. Default 32 MiB; 0 turns auto-tuning off.
   */
  sessionWindowBudget?: number;
  /** A budget every session of the process draws its growth from as well (the edge-wide budget). */
  sharedWindowBudget?: WindowBudget;
  /** Flood protection; defaults in config.ts (defaultFloodLimits). */
  floodLimits?: Partial<FloodLimits>;
  /**
   * Local policy, never announced (PROTOCOL.md §7, "Probe"): a stream this side opens to a peer quiet for
   * a second (PROBE_QUIET_MS) sends a PING, and a peer that sends nothing within this many ms is gone
   * (PeerTimeoutError), as at a heartbeat timeout. Needs the heartbeat on. Default 0: no probes.
   */
  probeTimeoutMs?: number;
  /**
   * Local policy (PROTOCOL.md §7): leave out this side's heartbeat PING in an interval in which the peer
   * sent one; the ACK already tells the peer we are alive. Halves an idle session's heartbeat messages.
   * This side then takes no round-trip samples after its startup ones. Default false.
   */
  skipPingWhenPinged?: boolean;
}
