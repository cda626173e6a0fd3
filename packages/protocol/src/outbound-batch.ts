import { FRAME_HEADER_SIZE } from './constants.js';
import { writeFrameHeader } from './frame-codec.js';

/**
 * Frames queued during one event-loop turn, written out together as few WebSocket messages.
 * Frames are kept as (header fields, payload view) until the flush, which copies each payload
 * exactly once into the outgoing message.
 */
export class OutboundBatch {
  #types: number[] = [];
  #flags: number[] = [];
  #streams: number[] = [];
  #payloads: (Buffer | undefined)[] = [];
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
    return this.#types.length === 0;
  }

  add(type: number, flags: number, streamId: number, payload: Buffer | undefined): void {
    this.#types.push(type);
    this.#flags.push(flags);
    this.#streams.push(streamId);
    this.#payloads.push(payload);
    this.#bytes += FRAME_HEADER_SIZE + (payload?.length ?? 0);
  }

  /**
   * Drains the batch into messages of at most maxMessageSize bytes (a bigger single frame gets its own).
   * `send` must call `release` once the transport no longer needs the message bytes; `last` marks the
   * batch's last message (once it is written, every frame of the batch is).
   */
  take(send: (message: Buffer, release: () => void, last: boolean) => void): void {
    const count = this.#types.length;
    let start = 0;
    while (start < count) {
      let size = 0;
      let end = start;
      while (end < count) {
        const frameSize = FRAME_HEADER_SIZE + (this.#payloads[end]?.length ?? 0);
        if (end > start && size + frameSize > this.#maxMessageSize) break;
        size += frameSize;
        end++;
      }
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
    this.#types.length = 0;
    this.#flags.length = 0;
    this.#streams.length = 0;
    this.#payloads.length = 0;
    this.#bytes = 0;
  }

  #release(buffer: Buffer): void {
    if (this.#free.length < MAX_FREE_BUFFERS) this.#free.push(buffer);
  }
}

const MAX_FREE_BUFFERS = 8;
const noop = (): void => {};
