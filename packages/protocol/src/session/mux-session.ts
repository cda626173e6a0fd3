import {
  type GoAway,
  goAwayPayload,
  parseGoAway,
  parseReset,
  parseWindowUpdate,
  u32Payload,
} from '../codec/control-frames.js';
import { FrameDecoder } from '../codec/frame-codec.js';
import { encodeHelloPayload, type Hello, parseHello } from '../codec/hello.js';
import {
  MAX_WINDOW,
  type ProtocolSettings,
  resolveSettings,
  resolveWindowTuning,
  settingsBeforeHello,
} from '../config.js';
import {
  ErrorCode,
  errorCodeName,
  FrameFlags,
  FrameType,
  MAX_NOTICE_BYTES,
  ownVersionRange,
} from '../constants.js';
import {
  frameError,
  PeerTimeoutError,
  ProtocolError,
  ProtocolErrorCode,
  StreamResetError,
} from '../errors.js';
import { FloodGuard } from './flood-guard.js';
import { agreedHeartbeat, type Heartbeat } from './heartbeat.js';
import type {
  FrameTransport,
  MuxSessionOptions,
  SessionHandler,
  SessionRole,
} from './mux-session-options.js';
import { MuxStream, type StreamHost } from './mux-stream.js';
import { RoundTripMeter } from './round-trip-meter.js';
import { SessionWriter } from './session-writer.js';
import * as guarded from './stream-guard.js';
import { StreamTable } from './stream-table.js';
import { WindowBudget } from './window-budget.js';

const DEFAULT_HIGH_WATER_MARK = 1024 * 1024;
const MAX_STREAM_ID = 0x7f_ff_ff_ff;

/**
 * One multiplexed session over one transport: frames in and out, streams, flow control,
 * heartbeats and graceful shutdown. Pure state machine: the owner feeds `receive()` and wires the transport.
 */
export class MuxSession implements StreamHost {
  readonly role: SessionRole;
  readonly localSettings: ProtocolSettings;
  peerSettings: ProtocolSettings = { ...settingsBeforeHello };
  sessionSendWindow = 0;
  /** Open streams by id (not a Map: stream-table.ts says why). */
  readonly streams = new StreamTable<MuxStream>();
  /** Frames decoded from and queued to the peer; plain counters an owner samples for metrics. */
  framesReceived = 0;
  framesSent = 0;
  readonly maxStreamWindow: number;
  /** Window growth this session's streams hold (limit 0: auto-tuning off). */
  readonly windowBudget: WindowBudget;

  readonly #transport: FrameTransport;
  readonly #handler: SessionHandler;
  readonly #decoder: FrameDecoder;
  readonly #writer: SessionWriter;
  readonly #flood: FloodGuard;
  #creditWaiters = new Set<MuxStream>();
  #sessionRecvWindow: number;
  #sessionUnacked = 0;
  #nextStreamId: number;
  #lastPeerStreamId = 0;
  #helloReceived = false;
  #helloSent = false;
  #goingAway = false;
  #peerGoingAway = false;
  #closed = false;
  #heartbeat: Heartbeat | undefined;
  readonly #probeTimeoutMs: number;
  readonly #skipPingWhenPinged: boolean;
  readonly roundTrip = new RoundTripMeter();

  constructor(options: MuxSessionOptions) {
    this.role = options.role;
    this.#transport = options.transport;
    this.#handler = options.handler;
    this.localSettings = resolveSettings(options.settings);
    this.#flood = new FloodGuard(options.floodLimits);
    // Validated by the owner's options (the edge's probeTimeoutMs); a negative value means none.
    this.#probeTimeoutMs = Math.max(0, options.probeTimeoutMs ?? 0);
    this.#skipPingWhenPinged = options.skipPingWhenPinged ?? false;
    this.#writer = new SessionWriter(
      options.transport,
      options.maxMessageSize ?? 256 * 1024,
      options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK,
      this.#flood,
      {
        failed: (error) => this.transportClosed(error),
        // Guarded: this runs from the transport's callback, where a handler's throw would escape the session.
        drained: (stream) => this.#guard(stream, () => stream.notifyDrain()),
      },
    );
    this.#sessionRecvWindow = this.localSettings.initialSessionWindow;
    const tuning = resolveWindowTuning(options);
    const tuned =
      tuning.sessionWindowBudget > 0 && tuning.maxStreamWindow > this.localSettings.initialStreamWindow;
    this.maxStreamWindow = tuned ? tuning.maxStreamWindow : this.localSettings.initialStreamWindow;
    this.windowBudget = new WindowBudget(tuned ? tuning.sessionWindowBudget : 0, options.sharedWindowBudget);
    this.#nextStreamId = options.role === 'edge' ? 1 : 2;
    this.#decoder = new FrameDecoder({
      maxFrameSize: this.localSettings.maxFrameSize,
      onFrameFields: (type, flags, streamId, payload) => this.#onFrame(type, flags, streamId, payload),
      splitData: true,
    });
  }

  /** Shortest round trip to the peer in ms, from PINGs (0 until measured); roundTrip.lastMs is the latest. */
  get rttMs(): number {
    return this.roundTrip.rttMs;
  }
  get closed(): boolean {
    return this.#closed;
  }
  get congested(): boolean {
    return this.#writer.congested;
  }
  get peerMaxFrameSize(): number {
    return this.peerSettings.maxFrameSize;
  }
  get ready(): boolean {
    return this.#helloReceived && !this.#closed;
  }
  /** True once either side announced GOAWAY: no new streams. */
  get draining(): boolean {
    return this.#goingAway || this.#peerGoingAway;
  }
  /** Bytes written to the transport and not yet confirmed flushed. */
  get bufferedBytes(): number {
    return this.#writer.bufferedBytes;
  }

  /**
   * Sends our HELLO (the agent first; the edge answers with `ack`). `versions`: the range offered, this
   * build's PROTOCOL_VERSION unless a test plays an older or newer peer.
   */
  sendHello(meta: Record<string, unknown>, ack: boolean, versions = ownVersionRange): void {
    const hello: Hello = { ...versions, settings: this.localSettings, meta };
    this.enqueue(FrameType.HELLO, ack ? FrameFlags.ACK : 0, 0, encodeHelloPayload(hello));
    this.#helloSent = true;
    if (this.#helloReceived) this.#begin();
  }

  /** Opens a stream towards the peer. Throws TOO_MANY_STREAMS when the peer's limit is reached. */
  openStream(): MuxStream {
    if (this.#closed)
      throw new ProtocolError(ProtocolErrorCode.SESSION_CLOSED, ErrorCode.NO_ERROR, 'session is closed');
    if (this.draining) {
      throw new ProtocolError(ProtocolErrorCode.SESSION_CLOSED, ErrorCode.GOING_AWAY, 'session is draining');
    }
    if (this.streams.size >= this.peerSettings.maxConcurrentStreams) {
      throw new ProtocolError(
        ProtocolErrorCode.TOO_MANY_STREAMS,
        ErrorCode.REFUSED_STREAM,
        `peer allows ${this.peerSettings.maxConcurrentStreams} concurrent streams`,
      );
    }
    const id = this.#nextStreamId;
    if (id > MAX_STREAM_ID) {
      throw new ProtocolError(
        ProtocolErrorCode.TOO_MANY_STREAMS,
        ErrorCode.REFUSED_STREAM,
        'stream ids exhausted',
      );
    }
    this.#nextStreamId += 2;
    const stream = this.#newStream(id);
    // A request is about to depend on the peer: one quiet for a while is asked whether it is still there.
    this.#heartbeat?.probe();
    return stream;
  }

  #newStream(id: number): MuxStream {
    const stream = new MuxStream(
      this,
      id,
      this.peerSettings.initialStreamWindow,
      this.localSettings.initialStreamWindow,
    );
    this.streams.set(stream);
    return stream;
  }

  /** Feeds one message, whole or its fragments in order; a violation ends the session with GOAWAY, never throws. */
  receive(message: Buffer | readonly Buffer[]): void {
    if (this.#closed) return;
    this.#heartbeat?.heard();
    try {
      this.#decoder.push(message);
    } catch (error) {
      this.#fail(error);
    }
  }

  /** Sends a liveness PING; the peer answers with an ACK. */
  ping(): void {
    this.enqueue(FrameType.PING, 0, 0, this.roundTrip.nextPing());
  }

  /** Announces a graceful shutdown: no new streams either way; open ones run to completion. */
  goAway(code: number = ErrorCode.NO_ERROR, reason = ''): void {
    if (this.#closed || this.#goingAway) return;
    this.#goingAway = true;
    const payload = goAwayPayload({ lastStreamId: this.#lastPeerStreamId, code, reason });
    this.enqueue(FrameType.GOAWAY, 0, 0, payload);
  }

  /** Ends the session now: streams are reset locally, GOAWAY is sent if the transport still works. */
  close(code: number = ErrorCode.NO_ERROR, reason = 'closing', error?: Error): void {
    if (this.#closed) return;
    this.goAway(code, reason);
    this.#writer.write();
    this.#transport.close(code === ErrorCode.NO_ERROR ? 1000 : 1002, reason.slice(0, 120));
    this.transportClosed(error);
  }

  /** The owner reports that the transport is gone. Every open stream hears a SESSION_CLOSED reset. */
  transportClosed(error?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#heartbeat?.stop();
    const streams = this.streams.values();
    for (const stream of streams) {
      try {
        stream.receiveReset(new StreamResetError(ErrorCode.SESSION_CLOSED, 'session closed'));
      } catch (error) {
        // A throwing handler must not keep the other streams, or the owner, from hearing the session ended.
        this.#handler.onStreamError?.(stream, error);
      }
    }
    this.streams.clear();
    this.#creditWaiters.clear();
    this.#writer.stop();
    this.#handler.onClose(error);
  }

  enqueue(type: number, flags: number, streamId: number, payload: Buffer | undefined): void {
    if (this.#closed) return;
    this.framesSent++;
    this.#writer.enqueue(type, flags, streamId, payload);
  }

  waitForSessionCredit(stream: MuxStream): void {
    this.#creditWaiters.add(stream);
  }

  waitForDrain(stream: MuxStream): void {
    this.#writer.waitForDrain(stream);
  }

  creditSession(bytes: number): void {
    if (bytes <= 0 || this.#closed) return;
    this.#sessionUnacked += bytes;
    if (this.#sessionUnacked >= this.localSettings.initialSessionWindow >>> 2) {
      this.#sessionRecvWindow += this.#sessionUnacked;
      this.enqueue(FrameType.WINDOW_UPDATE, 0, 0, u32Payload(this.#sessionUnacked));
      this.#sessionUnacked = 0;
    }
  }

  streamClosed(stream: MuxStream): void {
    this.streams.delete(stream.id);
    this.#creditWaiters.delete(stream);
    this.#writer.forget(stream);
    if (this.#closed) return;
    this.#handler.onStreamClosed?.(stream);
    if (this.streams.size === 0) this.#handler.onIdle?.();
  }

  /**
   * Queues an answer the peer can provoke without limit (a PING ACK, the refusal of a stream it opened).
   * Runs only while a received frame is decoded: past the flood bound the throw ends the session.
   */
  #answer(type: number, flags: number, streamId: number, payload: Buffer): void {
    this.#flood.answer();
    this.enqueue(type, flags, streamId, payload);
  }

  #onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    // A handler may close the session while the rest of a message is still being decoded.
    if (this.#closed) return;
    this.framesReceived++;
    if (!this.#helloReceived && type !== FrameType.HELLO && type !== FrameType.GOAWAY) {
      throw frameError(`frame type ${type} before HELLO`);
    }
    switch (type) {
      case FrameType.DATA:
        this.#onData(flags, streamId, payload);
        return;
      case FrameType.HEADERS:
        this.#onHeaders(flags, streamId, payload);
        return;
      case FrameType.WINDOW_UPDATE:
        this.#onWindowUpdate(streamId, payload);
        return;
      case FrameType.RESET: {
        const stream = this.streams.get(streamId);
        if (stream) this.#guard(stream, () => stream.receiveReset(new StreamResetError(parseReset(payload))));
        return;
      }
      case FrameType.PING:
        if ((flags & FrameFlags.ACK) === 0) {
          this.#answer(FrameType.PING, FrameFlags.ACK, 0, payload);
          this.#heartbeat?.pinged();
        } else if (this.roundTrip.acked(payload)) this.ping();
        return;
      case FrameType.GOAWAY:
        this.#onGoAway(parseGoAway(payload));
        return;
      case FrameType.HELLO:
        this.#onHello(flags, payload);
        return;
      case FrameType.NOTICE:
        this.#onNotice(payload);
        return;
      default:
        return;
    }
  }

  /** Tells the peer session metadata that changed since HELLO (a NOTICE frame; PROTOCOL.md §8). */
  sendNotice(meta: Record<string, unknown>): void {
    if (this.#closed) return;
    this.enqueue(FrameType.NOTICE, 0, 0, Buffer.from(JSON.stringify(meta)));
  }

  #onNotice(payload: Buffer): void {
    if (this.#handler.onNotice === undefined || payload.length > MAX_NOTICE_BYTES) return;
    let meta: unknown;
    try {
      meta = JSON.parse(payload.toString('utf8'));
    } catch {
      return;
    }
    if (typeof meta === 'object' && meta !== null && !Array.isArray(meta))
      this.#handler.onNotice(meta as Record<string, unknown>);
  }

  #onHello(flags: number, payload: Buffer): void {
    if (this.#helloReceived) throw frameError('second HELLO');
    const hello = parseHello(payload);
    this.#helloReceived = true;
    this.peerSettings = hello.settings;
    this.sessionSendWindow = hello.settings.initialSessionWindow;
    const sentBefore = this.#helloSent; // one sent from inside onHello began the session in sendHello
    this.#handler.onHello(hello, (flags & FrameFlags.ACK) !== 0);
    if (sentBefore) this.#begin();
  }
  // Both HELLOs out, once: nothing precedes ours (the edge may answer after onHello: tunnels are claimed).
  #begin(): void {
    this.#heartbeat = agreedHeartbeat(
      this.localSettings.heartbeatIntervalMs,
      this.peerSettings.heartbeatIntervalMs,
      {
        ping: () => this.ping(),
        silent: (ms) => this.close(ErrorCode.NO_ERROR, 'peer timed out', new PeerTimeoutError(ms)),
        probeTimeoutMs: this.#probeTimeoutMs,
        skipWhenPinged: this.#skipPingWhenPinged,
      },
    );
    if (this.windowBudget.limit > 0) this.#startTuning();
  }

  /**
   * A first round-trip sample for auto-tuning, without waiting for the first heartbeat; and the session
   * window sized by the budget, or it would cap the sum of the grown stream windows per round trip.
   */
  #startTuning(): void {
    this.ping();
    const extra = Math.min(this.windowBudget.limit, MAX_WINDOW - this.localSettings.initialSessionWindow);
    if (extra <= 0) return;
    this.#sessionRecvWindow += extra;
    this.enqueue(FrameType.WINDOW_UPDATE, 0, 0, u32Payload(extra));
  }

  #onHeaders(flags: number, streamId: number, payload: Buffer): void {
    const endStream = (flags & FrameFlags.END_STREAM) !== 0;
    let stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (!this.#isPeerStreamId(streamId) || streamId <= this.#lastPeerStreamId) return; // stale
      this.#lastPeerStreamId = streamId;
      // A side that serves no streams (the edge) refuses them, so a peer cannot park streams it opened.
      const refuse =
        this.#handler.onStream === undefined ||
        this.#goingAway ||
        this.streams.size >= this.localSettings.maxConcurrentStreams;
      if (refuse) {
        this.#answer(FrameType.RESET, 0, streamId, u32Payload(ErrorCode.REFUSED_STREAM));
        return;
      }
      const opened = this.#newStream(streamId);
      stream = opened;
      guarded.announceStream(opened, this.#handler);
      if (opened.closed) return;
    }
    guarded.receiveHeaders(stream, payload, endStream, this.#handler);
  }

  #onData(flags: number, streamId: number, payload: Buffer): void {
    const length = payload.length;
    const endStream = (flags & FrameFlags.END_STREAM) !== 0;
    this.#flood.data(length, endStream);
    if (length > this.#sessionRecvWindow) {
      throw new ProtocolError(
        ProtocolErrorCode.FLOW_CONTROL,
        ErrorCode.FLOW_CONTROL_ERROR,
        `${length} bytes of DATA exceed the session window of ${this.#sessionRecvWindow}`,
      );
    }
    this.#sessionRecvWindow -= length;
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId > this.#lastPeerStreamId && this.#isPeerStreamId(streamId)) {
        throw frameError(`DATA on stream ${streamId} that was never opened`);
      }
      // Late data for a stream we already closed: drop it, but keep the session window whole.
      this.creditSession(length);
      return;
    }
    guarded.receiveData(stream, payload, endStream, this.#handler);
  }

  #onWindowUpdate(streamId: number, payload: Buffer): void {
    const increment = parseWindowUpdate(payload);
    if (streamId !== 0) {
      const stream = this.streams.get(streamId);
      if (stream) guarded.receiveWindowUpdate(stream, increment, this.#handler);
      return;
    }
    this.sessionSendWindow += increment;
    if (this.sessionSendWindow > 0x7f_ff_ff_ff) {
      throw new ProtocolError(
        ProtocolErrorCode.FLOW_CONTROL,
        ErrorCode.FLOW_CONTROL_ERROR,
        'session window past 2^31-1',
      );
    }
    const waiters = [...this.#creditWaiters];
    this.#creditWaiters.clear();
    for (const stream of waiters) {
      if (this.sessionSendWindow <= 0) {
        this.#creditWaiters.add(stream);
        continue;
      }
      this.#guard(stream, () => stream.flushPending());
    }
  }

  #onGoAway(goAway: GoAway): void {
    this.#peerGoingAway = true;
    // Streams we opened that the peer never saw will not be served: refuse them so callers may retry.
    for (const stream of this.streams.values()) {
      if (!this.#isPeerStreamId(stream.id) && stream.id > goAway.lastStreamId) {
        this.#guard(stream, () =>
          stream.receiveReset(new StreamResetError(ErrorCode.REFUSED_STREAM, 'refused: peer is going away')),
        );
      }
    }
    this.#handler.onGoAway?.(goAway);
  }

  /** Runs per-stream work; a stream-level failure resets only that stream (see guardStream). */
  #guard(stream: MuxStream, work: () => void): void {
    guarded.guardStream(stream, work, this.#handler);
  }

  #isPeerStreamId(id: number): boolean {
    return id % 2 === (this.role === 'agent' ? 1 : 0); // an agent's peer opens the odd ids
  }

  #fail(error: unknown): void {
    const protocolError =
      error instanceof ProtocolError
        ? error
        : new ProtocolError(ProtocolErrorCode.MALFORMED_FRAME, ErrorCode.INTERNAL_ERROR, 'internal error', {
            cause: error,
          });
    this.close(
      protocolError.protocolCode,
      `${errorCodeName(protocolError.protocolCode)}: ${protocolError.message}`,
      protocolError,
    );
  }
}
