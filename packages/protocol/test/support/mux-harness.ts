import {
  decodeFrames,
  type Frame,
  type FrameTransport,
  type GoAway,
  type Hello,
  type MessageTransport,
  MuxSession,
  type MuxSessionOptions,
  type MuxStream,
  type PieceTransport,
  type ProtocolSettings,
  type SessionHandler,
  type SessionRole,
  type WindowBudget,
} from '../../src/index.js';
import { type Deferred, deferred } from './deferred.js';

/** Settings that keep session tests free of timers unless a test asks for a heartbeat. */
export const quietSettings: Partial<ProtocolSettings> = { heartbeatIntervalMs: 0 };

/**
 * Auto-tuning off: exact windows (credit returned = bytes consumed, the session window as announced) and no
 * timing PINGs, for the tests of flow control itself. Tests of tuning, and of the defaults, ask for it.
 */
export const exactWindows = { sessionWindowBudget: 0 } as const;

/** Resolves with the first frame in `frames` (now or later) that matches. */
export class FrameLog {
  readonly frames: Frame[] = [];
  #waiters: { match: (frame: Frame) => boolean; done: Deferred<Frame> }[] = [];

  add(message: Buffer): void {
    for (const frame of decodeFrames(message)) {
      this.frames.push(frame);
      this.#waiters = this.#waiters.filter((w) => {
        if (!w.match(frame)) return true;
        w.done.resolve(frame);
        return false;
      });
    }
  }

  waitFor(match: (frame: Frame) => boolean): Promise<Frame> {
    const found = this.frames.find(match);
    if (found !== undefined) return Promise.resolve(found);
    const done = deferred<Frame>();
    this.#waiters.push({ match, done });
    return done.promise;
  }
}

/**
 * One end of an in-memory pipe: send() hands the message to the peer's receive() on a later turn (like a
 * socket would) and then reports it flushed; close() tells the peer its transport went away, after the
 * messages already sent, as a WebSocket close would.
 */
export class MemoryTransport implements MessageTransport {
  peer: MuxSession | undefined;
  /** Every frame this side sent, in order. */
  readonly sent = new FrameLog();
  closedWith: { code: number; reason: string } | undefined;
  /** One-way delay of the pipe in ms (0: the next turn). Messages keep their order either way. */
  latencyMs = 0;
  /** When > 0, each message arrives as pieces of this size, as ws hands over a fragmented message. */
  pieceSize = 0;

  send(message: Buffer, done: (error?: Error) => void): void {
    // A copy, as the wire would make: the session reuses the message's memory once done() runs.
    const copy = Buffer.from(message);
    this.sent.add(copy);
    const onTheWire = this.pieceSize > 0 ? inPieces(copy, this.pieceSize) : copy;
    if (this.latencyMs > 0) {
      // Like a socket on a long link: the bytes leave at once and arrive later.
      setImmediate(done);
      setTimeout(() => this.peer?.receive(onTheWire), this.latencyMs);
      return;
    }
    setImmediate(() => {
      this.peer?.receive(onTheWire);
      done();
    });
  }

  close(code: number, reason: string): void {
    this.closedWith = { code, reason };
    setImmediate(() => this.peer?.transportClosed());
  }
}

/**
 * A MemoryTransport that takes messages as pieces, as the WebSocket transports do: the receiver gets each
 * piece as a fragment of its own (copied, as the wire would), or pieces of `pieceSize` when set.
 */
export class PieceMemoryTransport extends MemoryTransport implements PieceTransport {
  sendPieces(pieces: readonly Buffer[], size: number, done: (error?: Error) => void): void {
    const joined = Buffer.concat(pieces);
    if (joined.length !== size) throw new Error(`pieces of ${joined.length} bytes announced as ${size}`);
    if (this.pieceSize > 0 || this.latencyMs > 0) {
      this.send(joined, done);
      return;
    }
    this.sent.add(joined);
    // Read late, as a socket does: a producer that changed its chunk after the flush corrupts what arrives.
    setImmediate(() => {
      this.peer?.receive(pieces.map((piece) => Buffer.from(piece)));
      done();
    });
  }
}

function inPieces(message: Buffer, size: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < message.length; at += size) pieces.push(message.subarray(at, at + size));
  return pieces;
}

/** The session-level events of one side, as promises and lists. */
export class SessionEvents implements SessionHandler {
  readonly hello = deferred<{ hello: Hello; ack: boolean }>();
  readonly closed = deferred<Error | undefined>();
  readonly goAway = deferred<GoAway>();
  readonly streamErrors: { stream: MuxStream; error: unknown }[] = [];
  /** How often the last open stream closed. */
  idleCount = 0;
  onStreamOpened: ((stream: MuxStream) => void) | undefined;
  /** Extra work on HELLO (the edge answers the agent's HELLO here). */
  afterHello: ((hello: Hello, ack: boolean) => void) | undefined;

  onHello(hello: Hello, ack: boolean): void {
    this.hello.resolve({ hello, ack });
    this.afterHello?.(hello, ack);
  }
  onStream(stream: MuxStream): void {
    this.onStreamOpened?.(stream);
  }
  onGoAway(goAway: GoAway): void {
    this.goAway.resolve(goAway);
  }
  /** Every NOTICE's metadata, in order. */
  readonly notices: Record<string, unknown>[] = [];
  onNotice(meta: Record<string, unknown>): void {
    this.notices.push(meta);
  }
  onStreamError(stream: MuxStream, error: unknown): void {
    this.streamErrors.push({ stream, error });
  }
  onClose(error: Error | undefined): void {
    this.closed.resolve(error);
  }
  onIdle(): void {
    this.idleCount++;
  }
}

export interface Side {
  session: MuxSession;
  transport: MemoryTransport;
  events: SessionEvents;
}

export interface Pair {
  edge: Side;
  agent: Side;
  /** Ends both sessions (idempotent), so no test leaves state behind. */
  dispose(): void;
}

export interface PairOptions {
  /** Applied to both sides unless overridden per side. */
  settings?: Partial<ProtocolSettings>;
  edgeSettings?: Partial<ProtocolSettings>;
  agentSettings?: Partial<ProtocolSettings>;
  highWaterMark?: number;
  /** Turns on receive-window auto-tuning on both sides, up to this many bytes per stream. */
  maxStreamWindow?: number;
  /** Each session's growth budget when auto-tuning is on (default: the protocol's). */
  sessionWindowBudget?: number;
  /** One budget both sessions draw on as well, as the edge's sessions share one. */
  sharedWindowBudget?: WindowBudget;
  /** The sessions' own defaults (auto-tuning on) instead of exact windows when nothing above is given. */
  defaultTuning?: boolean;
  /** This side keeps exact windows whatever the rest says: a peer from before auto-tuning. */
  oldSide?: SessionRole;
  /** One-way delay of both directions of the pipe, in ms. */
  latencyMs?: number;
  /** Messages arrive as pieces of this many bytes (ws binaryType 'fragments'); 0: whole. */
  pieceSize?: number;
  /** The sessions send through PieceMemoryTransport (large payloads uncopied), as the real transports do. */
  pieceTransport?: boolean;
}

function createSide(role: SessionRole, settings: Partial<ProtocolSettings>, options: PairOptions): Side {
  const transport = options.pieceTransport === true ? new PieceMemoryTransport() : new MemoryTransport();
  transport.latencyMs = options.latencyMs ?? 0;
  transport.pieceSize = options.pieceSize ?? 0;
  const events = new SessionEvents();
  const session = new MuxSession({
    role,
    transport,
    handler: events,
    settings,
    ...(options.highWaterMark === undefined ? {} : { highWaterMark: options.highWaterMark }),
    ...(options.oldSide === role ? exactWindows : tuningOf(options)),
  });
  return { session, transport, events };
}

function tuningOf(options: PairOptions): Partial<MuxSessionOptions> {
  const tuned = options.defaultTuning === true || options.maxStreamWindow !== undefined;
  const tuning: Partial<MuxSessionOptions> = tuned ? {} : { ...exactWindows };
  if (options.maxStreamWindow !== undefined) tuning.maxStreamWindow = options.maxStreamWindow;
  if (options.sessionWindowBudget !== undefined) tuning.sessionWindowBudget = options.sessionWindowBudget;
  if (options.sharedWindowBudget !== undefined) tuning.sharedWindowBudget = options.sharedWindowBudget;
  return tuning;
}

/** Builds an edge and an agent wired back to back, without the handshake. */
export function createPair(options: PairOptions = {}): Pair {
  const edge = createSide(
    'edge',
    { ...quietSettings, ...options.settings, ...options.edgeSettings },
    options,
  );
  const agent = createSide(
    'agent',
    { ...quietSettings, ...options.settings, ...options.agentSettings },
    options,
  );
  edge.transport.peer = agent.session;
  agent.transport.peer = edge.session;
  return {
    edge,
    agent,
    dispose() {
      edge.session.transportClosed();
      agent.session.transportClosed();
    },
  };
}

/** Builds a pair and runs the handshake: the agent says HELLO first, the edge answers with ACK. */
export async function connectPair(options: PairOptions = {}): Promise<Pair> {
  const pair = createPair(options);
  pair.edge.events.afterHello = (_hello, ack) => {
    if (!ack) pair.edge.session.sendHello({ session: 'test' }, true);
  };
  pair.agent.session.sendHello({ agent: 'test' }, false);
  await pair.agent.events.hello.promise;
  return pair;
}

/**
 * A session under test whose peer is the test itself: the test feeds raw frames with `feed()` and reads
 * what the session sent in `sent`. Used where a well-behaved MuxSession peer cannot misbehave.
 */
export interface RawPeer {
  session: MuxSession;
  events: SessionEvents;
  sent: FrameLog;
  closes: { code: number; reason: string }[];
  feed(...frames: Buffer[]): void;
}

export function createRawPeer(
  role: SessionRole,
  settings: Partial<ProtocolSettings> = {},
  options: Pick<MuxSessionOptions, 'probeTimeoutMs' | 'skipPingWhenPinged'> = {},
): RawPeer {
  const sent = new FrameLog();
  const closes: { code: number; reason: string }[] = [];
  const transport: FrameTransport = {
    send(message, done) {
      sent.add(Buffer.from(message));
      setImmediate(done);
    },
    close(code, reason) {
      closes.push({ code, reason });
    },
  };
  const events = new SessionEvents();
  const session = new MuxSession({
    role,
    transport,
    handler: events,
    settings: { ...quietSettings, ...settings },
    ...exactWindows,
    ...options,
  });
  return { session, events, sent, closes, feed: (...frames) => session.receive(Buffer.concat(frames)) };
}
