import type { FloodGuard } from './flood-guard.js';
import type { FrameTransport } from './mux-session-options.js';
import type { MuxStream } from './mux-stream.js';
import { OutboundBatch } from './outbound-batch.js';

/** What the writer tells its session: a failed send ends it; a stream that waited for the drain hears it. */
export interface WriterEvents {
  failed(error: Error): void;
  /** Runs one waiting stream's `notifyDrain` (the session guards it: a handler may throw). */
  drained(stream: MuxStream): void;
}

/**
 * The outbound half of a MuxSession: frames queued during one event-loop turn are written together on the
 * next, bytes handed to the transport and not yet confirmed sent are counted, and past the high-water mark
 * the session is congested until half of it has drained, when the streams that waited are told. The session
 * decides what to send and when it is closed; this file only moves the queued frames to the transport.
 */
export class SessionWriter {
  readonly #transport: FrameTransport;
  readonly #batch: OutboundBatch;
  readonly #highWaterMark: number;
  readonly #flood: FloodGuard;
  readonly #events: WriterEvents;
  #flushScheduled = false;
  #outstanding = 0;
  #congested = false;
  #stopped = false;
  readonly #drainWaiters = new Set<MuxStream>();

  constructor(
    transport: FrameTransport,
    maxMessageSize: number,
    highWaterMark: number,
    flood: FloodGuard,
    events: WriterEvents,
  ) {
    this.#transport = transport;
    this.#batch = new OutboundBatch(maxMessageSize);
    this.#highWaterMark = highWaterMark;
    this.#flood = flood;
    this.#events = events;
  }

  get congested(): boolean {
    return this.#congested;
  }
  /** Bytes written to the transport and not yet confirmed flushed, and bytes still queued. */
  get bufferedBytes(): number {
    return this.#outstanding + this.#batch.bytes;
  }

  /** Queues one frame; the batch is written on the next turn of the event loop. */
  enqueue(type: number, flags: number, streamId: number, payload: Buffer | undefined): void {
    this.#batch.add(type, flags, streamId, payload);
    if (!this.#congested && this.#outstanding + this.#batch.bytes > this.#highWaterMark)
      this.#congested = true;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flush);
    }
  }

  waitForDrain(stream: MuxStream): void {
    this.#drainWaiters.add(stream);
  }

  /** The stream closed: it waits for nothing any more. */
  forget(stream: MuxStream): void {
    this.#drainWaiters.delete(stream);
  }

  /** The session is over: a scheduled flush writes nothing, and no stream is told of a drain. */
  stop(): void {
    this.#stopped = true;
    this.#drainWaiters.clear();
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.#stopped) return;
    this.write();
  };

  /** Hands the queued frames to the transport now (the session's last GOAWAY goes out this way). */
  write(): void {
    if (this.#batch.empty) return;
    const answers = this.#flood.takeBatch();
    this.#batch.drainTo(
      this.#transport,
      (bytes) => {
        this.#outstanding += bytes;
      },
      (bytes, last, error) => this.#onSent(bytes, last ? answers : 0, error),
    );
  }

  #onSent(bytes: number, answers: number, error: Error | null | undefined): void {
    this.#outstanding -= bytes;
    this.#flood.written(answers);
    if (error) {
      this.#events.failed(error);
      return;
    }
    if (this.#congested && this.#outstanding + this.#batch.bytes <= this.#highWaterMark >>> 1) {
      this.#congested = false;
      const waiters = [...this.#drainWaiters];
      this.#drainWaiters.clear();
      for (const stream of waiters) this.#events.drained(stream);
    }
  }
}
