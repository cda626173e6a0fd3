import { writeFrameHeader } from '../codec/frame-codec.js';
import { FRAME_HEADER_SIZE } from '../constants.js';
import type { FrameTransport } from './mux-session-options.js';

/**
 * Frames queued during one event-loop turn, written out together as few WebSocket messages.
 * Frames are kept as (header fields, payload view) until the flush, which either copies each payload
 * exactly once into the outgoing message (`take`) or copies only headers and small payloads and hands the
 * large ones over as they are (`takePieces`): a producer must not change a chunk once it has written it.
 */
export class OutboundBatch {
  // Written by index up to #count and never truncated: `length = 0` gives up an array's backing store, so
  // each turn's frames regrew four of them (collector time per request, issue #34). A drained batch keeps
  // no payload (#clear), and lists that grew past MAX_KEPT_FRAMES are let go.
  #types: number[] = [];
  #flags: number[] = [];
  #streams: number[] = [];
  #payloads: (Buffer | undefined)[] = [];
  #count = 0;
  #bytes = 0;
  readonly #maxMessageSize: number;
  /** Message buffers whose send completed, reused so a busy session does not churn large allocations. */
  readonly #free: Buffer[] = [];

  constructor(maxMessageSize: number) {
    this.#maxMessageSize = maxMessageSize;
  }

  get bytes(): number {
    return this.#bytes;
  }
  get empty(): boolean {
    return this.#count === 0;
  }

  add(type: number, flags: number, streamId: number, payload: Buffer | undefined): void {
    const i = this.#count++;
    this.#types[i] = type;
    this.#flags[i] = flags;
    this.#streams[i] = streamId;
    this.#payloads[i] = payload;
    this.#bytes += FRAME_HEADER_SIZE + (payload?.length ?? 0);
  }

  /**
   * Drains the batch into `transport`, as pieces when it takes them (no copy of large payloads), else as
   * whole messages. `queued` runs before each message is handed over (its send may complete at once),
   * `sent` when it completed; `last` marks the batch's last message.
   */
  drainTo(
    transport: FrameTransport,
    queued: (bytes: number) => void,
    sent: (bytes: number, last: boolean, error: Error | null | undefined) => void,
  ): void {
    if ('sendPieces' in transport) {
      this.takePieces((pieces, size, last) => {
        queued(size);
        transport.sendPieces(pieces, size, (error) => sent(size, last, error));
      });
      return;
    }
    this.take((message, release, last) => {
      queued(message.length);
      transport.send(message, (error) => {
        release();
        sent(message.length, last, error);
      });
    });
  }

  /**
   * Drains the batch like `take`, without copying large payloads: each message is a list of pieces, where
   * frame headers and payloads under INLINE_BELOW bytes are copied into small buffers and every larger
   * payload is the producer's own chunk (a view). The pieces joined are exactly `take`'s message, so a
   * transport that sends them as fragments of one WebSocket message changes nothing on the wire. `send`
   * gets the message's size; the pieces must not be kept after the send completes.
   */
  takePieces(send: (pieces: Buffer[], size: number, last: boolean) => void): void {
    const count = this.#count;
    let start = 0;
    while (start < count) {
      const end = this.#messageEnd(start);
      let inline = 0;
      let size = 0;
      for (let i = start; i < end; i++) {
        const length = this.#payloads[i]?.length ?? 0;
        size += FRAME_HEADER_SIZE + length;
        inline += FRAME_HEADER_SIZE + (length < INLINE_BELOW ? length : 0);
      }
      const scratch = Buffer.allocUnsafe(inline);
      const pieces: Buffer[] = [];
      let offset = 0;
      let runStart = 0;
      for (let i = start; i < end; i++) {
        const payload = this.#payloads[i];
        const length = payload?.length ?? 0;
        writeFrameHeader(scratch, offset, this.#types[i]!, this.#flags[i]!, this.#streams[i]!, length);
        offset += FRAME_HEADER_SIZE;
        if (payload === undefined || length === 0) continue;
        if (length < INLINE_BELOW) {
          payload.copy(scratch, offset);
          offset += length;
          continue;
        }
        pieces.push(scratch.subarray(runStart, offset), payload);
        runStart = offset;
      }
      if (offset > runStart) pieces.push(scratch.subarray(runStart, offset));
      send(pieces, size, end === count);
      start = end;
    }
    this.#clear();
  }

  /**
   * Drains the batch into messages of at most maxMessageSize bytes (a bigger single frame gets its own).
   * `send` must call `release` once the transport no longer needs the message bytes; `last` marks the
   * batch's last message (once it is written, every frame of the batch is).
   */
  take(send: (message: Buffer, release: () => void, last: boolean) => void): void {
    const count = this.#count;
    let start = 0;
    while (start < count) {
      const end = this.#messageEnd(start);
      let size = 0;
      for (let i = start; i < end; i++) size += FRAME_HEADER_SIZE + (this.#payloads[i]?.length ?? 0);
      // Only a large message borrows a whole message-sized buffer: a peer that does not read would
      // otherwise pin 256 KiB per 17-byte PING ACK until its socket drains.
      const pooled =
        size <= this.#maxMessageSize && size >= this.#maxMessageSize >>> 2
          ? (this.#free.pop() ?? Buffer.allocUnsafeSlow(this.#maxMessageSize))
          : undefined;
      const message = pooled === undefined ? Buffer.allocUnsafe(size) : pooled.subarray(0, size);
      let offset = 0;
      for (let i = start; i < end; i++) {
        const payload = this.#payloads[i];
        const length = payload?.length ?? 0;
        writeFrameHeader(message, offset, this.#types[i]!, this.#flags[i]!, this.#streams[i]!, length);
        offset += FRAME_HEADER_SIZE;
        if (payload !== undefined && length > 0) {
          payload.copy(message, offset);
          offset += length;
        }
      }
      send(message, pooled === undefined ? noop : () => this.#release(pooled), end === count);
      start = end;
    }
    this.#clear();
  }

  /** Where the message that starts at frame `start` ends: at most maxMessageSize bytes, or one bigger frame. */
  #messageEnd(start: number): number {
    const count = this.#count;
    let size = 0;
    let end = start;
    while (end < count) {
      const frameSize = FRAME_HEADER_SIZE + (this.#payloads[end]?.length ?? 0);
      if (end > start && size + frameSize > this.#maxMessageSize) break;
      size += frameSize;
      end++;
    }
    return end;
  }

  #clear(): void {
    if (this.#count > MAX_KEPT_FRAMES) {
      this.#types = [];
      this.#flags = [];
      this.#streams = [];
      this.#payloads = [];
    } else this.#payloads.fill(undefined, 0, this.#count);
    this.#count = 0;
    this.#bytes = 0;
  }

  #release(buffer: Buffer): void {
    if (this.#free.length < MAX_FREE_BUFFERS) this.#free.push(buffer);
  }
}

const MAX_FREE_BUFFERS = 8;
/** A turn that queued more frames than this (a burst) does not leave lists that long behind. */
const MAX_KEPT_FRAMES = 256;
/**
 * Payloads shorter than this are copied next to their frame header rather than sent as a piece of their own:
 * each piece becomes a WebSocket fragment with its own header and write entry, which costs more than
 * copying a few KiB.
 */
const INLINE_BELOW = 8 * 1024;
const noop = (): void => {};
