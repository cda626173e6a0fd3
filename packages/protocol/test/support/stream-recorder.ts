import type { MuxStream, StreamHandler, StreamResetError } from '../../src/index.js';
import { type Deferred, deferred } from './deferred.js';
import { requestHead } from './exchange.js';
import type { Pair } from './mux-harness.js';

/**
 * How the recorder returns credit: at once from onData, on the next turn (a consumer that passes bytes on
 * asynchronously), or only when the test calls `consumeAll()`.
 */
export type ConsumeMode = 'sync' | 'next-turn' | 'manual';

/** A StreamHandler that records what arrives and turns each callback into something a test can await. */
export class StreamRecorder implements StreamHandler {
  readonly stream: MuxStream;
  readonly heads: Buffer[] = [];
  readonly chunks: Buffer[] = [];
  readonly ended = deferred();
  readonly resetError = deferred<StreamResetError>();
  received = 0;
  consumed = 0;
  drains = 0;
  /** The largest number of bytes delivered and not yet consumed at any moment. */
  maxUnconsumed = 0;
  readonly #mode: ConsumeMode;
  #byteWaiters: { bytes: number; done: Deferred<void> }[] = [];
  #headWaiters: { count: number; done: Deferred<void> }[] = [];
  #drain: Deferred<void> | undefined;
  /** Called with each chunk after it is recorded (lets a test check a cross-stream invariant). */
  onChunk: ((chunk: Buffer) => void) | undefined;
  /** Called with each head after it is recorded; a throw here is a throwing stream handler. */
  onHead: ((head: Buffer) => void) | undefined;

  constructor(stream: MuxStream, mode: ConsumeMode = 'sync') {
    this.stream = stream;
    this.#mode = mode;
    stream.handler = this;
  }

  get unconsumed(): number {
    return this.received - this.consumed;
  }

  body(): Buffer {
    return Buffer.concat(this.chunks);
  }

  onHeaders(payload: Buffer, _endStream: boolean): void {
    this.heads.push(Buffer.from(payload));
    this.onHead?.(payload);
    this.#headWaiters = this.#headWaiters.filter((w) => {
      if (this.heads.length < w.count) return true;
      w.done.resolve();
      return false;
    });
  }

  onData(chunk: Buffer): void {
    // The chunk is a view of the transport message; keep a copy.
    this.chunks.push(Buffer.from(chunk));
    this.received += chunk.length;
    this.maxUnconsumed = Math.max(this.maxUnconsumed, this.unconsumed);
    this.onChunk?.(chunk);
    if (this.#mode === 'sync') this.#consume(chunk.length);
    else if (this.#mode === 'next-turn') setImmediate(() => this.#consume(chunk.length));
    this.#byteWaiters = this.#byteWaiters.filter((w) => {
      if (this.received < w.bytes) return true;
      w.done.resolve();
      return false;
    });
  }

  onEnd(): void {
    this.ended.resolve();
  }

  onReset(error: StreamResetError): void {
    this.resetError.resolve(error);
    // A writer waiting for drain must not hang on a dead stream.
    this.#drain?.resolve();
    this.#drain = undefined;
  }

  onDrain(): void {
    this.drains++;
    this.#drain?.resolve();
    this.#drain = undefined;
  }

  /** Resolves once at least `bytes` body bytes arrived. */
  waitForBytes(bytes: number): Promise<void> {
    if (this.received >= bytes) return Promise.resolve();
    const done = deferred();
    this.#byteWaiters.push({ bytes, done });
    return done.promise;
  }

  /** Resolves once at least `count` heads arrived. */
  waitForHeads(count = 1): Promise<void> {
    if (this.heads.length >= count) return Promise.resolve();
    const done = deferred();
    this.#headWaiters.push({ count, done });
    return done.promise;
  }

  /** Resolves at the next onDrain (or reset). Call right after `write()` returned false. */
  nextDrain(): Promise<void> {
    this.#drain ??= deferred();
    return this.#drain.promise;
  }

  /** Returns the credit for everything received so far. */
  consumeAll(): void {
    this.#consume(this.unconsumed);
  }

  #consume(bytes: number): void {
    this.consumed += bytes;
    this.stream.consume(bytes);
  }
}

/** Writes `body` in `chunkSize` pieces, honouring every `write()` return value, then ends the stream. */
export async function writeBody(recorder: StreamRecorder, body: Buffer, chunkSize: number): Promise<void> {
  const { stream } = recorder;
  for (let offset = 0; offset < body.length; offset += chunkSize) {
    if (stream.closed) throw new Error(`stream ${stream.id} closed while writing`);
    if (!stream.write(body.subarray(offset, offset + chunkSize))) await recorder.nextDrain();
  }
  // Before end() a stream can only be closed by a reset.
  if (stream.closed) throw new Error(`stream ${stream.id} closed while writing`);
  stream.end();
}

/** Opens a stream from the edge and records both ends; the agent end consumes as `mode` says. */
export async function openRecorded(
  pair: Pair,
  mode: ConsumeMode,
): Promise<{ edge: StreamRecorder; agent: StreamRecorder }> {
  const atAgent = deferred<StreamRecorder>();
  pair.agent.events.onStreamOpened = (stream) => atAgent.resolve(new StreamRecorder(stream, mode));
  const stream = pair.edge.session.openStream();
  const edge = new StreamRecorder(stream);
  stream.sendHeaders(requestHead(`/upload/${stream.id}`), false);
  return { edge, agent: await atAgent.promise };
}
