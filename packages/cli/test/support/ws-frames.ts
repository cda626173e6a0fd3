import { randomBytes } from 'node:crypto';

/*
 * WebSocket frames written and read by hand (RFC 6455 §5.2), for a client whose transport is not a socket
 * `ws` can take: an RFC 8441 stream of an HTTP/2 connection. A client's frames are masked; a server's are
 * not. Final frames only: these tests send and expect unfragmented messages.
 */

export const OPCODE = { text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const;

/** One masked client frame carrying `payload` whole. */
export function clientFrame(opcode: number, payload: Buffer | string): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const length = data.length;
  const sizeBytes = length < 126 ? 0 : length < 65536 ? 2 : 8;
  const head = Buffer.alloc(2 + sizeBytes + 4);
  head[0] = 0x80 | opcode;
  if (sizeBytes === 0) head[1] = 0x80 | length;
  else if (sizeBytes === 2) {
    head[1] = 0x80 | 126;
    head.writeUInt16BE(length, 2);
  } else {
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(length), 2);
  }
  const mask = randomBytes(4);
  mask.copy(head, 2 + sizeBytes);
  const masked = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) masked[i] = data[i]! ^ mask[i & 3]!;
  return Buffer.concat([head, masked]);
}

/** A close frame from the client with `code` (and no reason). */
export function clientClose(code: number): Buffer {
  const payload = Buffer.alloc(2);
  payload.writeUInt16BE(code);
  return clientFrame(OPCODE.close, payload);
}

export interface Frame {
  opcode: number;
  payload: Buffer;
}

/** Reads a server's (unmasked) frames from chunks as they arrive, split anywhere. */
export class FrameReader {
  #buffered = Buffer.alloc(0);
  readonly frames: Frame[] = [];
  #waiters: { count: number; resolve: (frames: Frame[]) => void }[] = [];

  push(chunk: Buffer): void {
    this.#buffered = Buffer.concat([this.#buffered, chunk]);
    for (;;) {
      const buf = this.#buffered;
      if (buf.length < 2) break;
      let length = buf[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buf.length < 4) break;
        length = buf.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buf.length < 10) break;
        length = Number(buf.readBigUInt64BE(2));
        offset = 10;
      }
      if (buf.length < offset + length) break;
      this.frames.push({ opcode: buf[0]! & 0x0f, payload: buf.subarray(offset, offset + length) });
      this.#buffered = buf.subarray(offset + length);
    }
    for (const waiter of [...this.#waiters]) {
      if (this.frames.length >= waiter.count) {
        this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
        waiter.resolve(this.frames.slice(0, waiter.count));
      }
    }
  }

  /** Resolves once `count` frames have been read in all. */
  next(count = this.frames.length + 1): Promise<Frame[]> {
    if (this.frames.length >= count) return Promise.resolve(this.frames.slice(0, count));
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }
}
