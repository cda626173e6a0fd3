import { type MuxSession, type MuxStream, ProtocolError, ProtocolErrorCode } from '@tunnel2/protocol';

/** Someone waiting for a stream slot on a session: told exactly once, either way. */
export interface SlotWaiter {
  /** A slot came free and this stream was opened for the waiter. */
  granted(stream: MuxStream): void;
  /** No slot within the wait, or the session can no longer open streams. */
  refused(): void;
}

export interface StreamSlotsOptions {
  /** Concurrent streams the edge allows this session (the agent's announced limit may be lower). */
  maxStreams: number;
  /** How long a waiter may wait; 0 refuses at once. */
  maxWaitMs: number;
  /** How many may wait at once; beyond, refused at once (bounds memory under overload). */
  maxWaiting: number;
}

/**
 * The concurrent-stream limit of one session, with a bounded FIFO of requests waiting for a slot. Every
 * waiter has the same wait, so arrival order is deadline order: one timer, armed for the oldest waiter,
 * expires them all — no timer per request. A Map keeps that order and removes a waiter whose client
 * left in O(1).
 */
export class StreamSlots {
  readonly #session: MuxSession;
  readonly #options: StreamSlotsOptions;
  /** Waiter → deadline (ms on the performance clock), oldest first. */
  readonly #waiting = new Map<SlotWaiter, number>();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(session: MuxSession, options: StreamSlotsOptions) {
    this.#session = session;
    this.#options = options;
  }

  get waiting(): number {
    return this.#waiting.size;
  }

  #free(): boolean {
    const limit = Math.min(this.#options.maxStreams, this.#session.peerSettings.maxConcurrentStreams);
    return this.#session.streams.size < limit;
  }

  /**
   * Opens a stream now if a slot is free and nobody is queued ahead (FIFO: no overtaking). Returns
   * undefined when the caller should wait; throws the session's own errors (closed, draining).
   */
  tryOpen(): MuxStream | undefined {
    if (this.#waiting.size > 0 || !this.#free()) return undefined;
    try {
      return this.#session.openStream();
    } catch (err) {
      if (err instanceof ProtocolError && err.code === ProtocolErrorCode.TOO_MANY_STREAMS) return undefined;
      throw err;
    }
  }

  /** Queues a waiter; false (and nothing queued) when waiting is off, the queue is full or closed. */
  wait(waiter: SlotWaiter): boolean {
    if (this.#closed || this.#options.maxWaitMs === 0 || this.#waiting.size >= this.#options.maxWaiting) {
      return false;
    }
    this.#waiting.set(waiter, performance.now() + this.#options.maxWaitMs);
    if (this.#timer === undefined) this.#arm(this.#options.maxWaitMs);
    return true;
  }

  /** The waiter's client went away: it leaves the queue (the timer re-arms lazily). */
  cancel(waiter: SlotWaiter): void {
    this.#waiting.delete(waiter);
  }

  /** A stream closed: the oldest waiters take the free slots. */
  release(): void {
    while (this.#waiting.size > 0 && this.#free()) {
      const waiter = this.#waiting.keys().next().value as SlotWaiter;
      this.#waiting.delete(waiter);
      let stream: MuxStream;
      try {
        stream = this.#session.openStream();
      } catch {
        // Draining, closed or out of stream ids: nobody queued can be served any more.
        waiter.refused();
        this.close();
        return;
      }
      waiter.granted(stream);
    }
  }

  /** The session ended or drains: every waiter is refused. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const waiters = [...this.#waiting.keys()];
    this.#waiting.clear();
    for (const waiter of waiters) waiter.refused();
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(this.#expire, Math.max(1, Math.ceil(delayMs)));
    this.#timer.unref();
  }

  readonly #expire = (): void => {
    this.#timer = undefined;
    const now = performance.now();
    for (const [waiter, deadline] of this.#waiting) {
      if (deadline > now) {
        this.#arm(deadline - now);
        return;
      }
      this.#waiting.delete(waiter);
      waiter.refused();
    }
  };
}
