import { connect, type Socket } from 'node:net';

// A hostile HTTP/2 client's means, written here rather than taken from a library: it must be able to send
// what no correct client would (floods, resets, header blocks that never end). Frames per RFC 9113 §4.1,
// header blocks per RFC 7541 (literal fields, integers with an N-bit prefix, dynamic-table references).

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Buffer = Buffer.alloc(0),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `n`-bit prefix, the high bits of the first byte set to `mask`. */
export function hpackInt(value: number, n: number, mask = 0): Buffer {
  const max = (1 << n) - 1;
  if (value < max) return Buffer.from([mask | value]);
  const out = [mask | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([hpackInt(bytes.length, 7), bytes]);
}

/** A field as a literal without indexing, new name (RFC 7541 §6.2.2). */
export function literal(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x00]), hpackString(name), hpackString(value)]);
}

/** A field as a literal with incremental indexing, new name (§6.2.1): it enters the dynamic table. */
export function indexedLiteral(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x40]), hpackString(name), hpackString(value)]);
}

/** A reference to table entry `index` (§6.1): one byte for the first 126 entries. */
export function indexed(index: number): Buffer {
  return hpackInt(index, 7, 0x80);
}

/** A GET's header block: literal fields only. */
export function requestBlock(authority: string, path = '/', extra: [string, string][] = []): Buffer {
  return Buffer.concat([
    literal(':method', 'GET'),
    literal(':scheme', 'http'),
    literal(':path', path),
    literal(':authority', authority),
    ...extra.map(([name, value]) => literal(name, value)),
  ]);
}

export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** A raw HTTP/2 connection: writes what it is given, parses every frame the server sends. */
export class RawH2 {
  readonly socket: Socket;
  readonly frames: Frame[] = [];
  closed = false;
  #buffer = Buffer.alloc(0);
  #waiters: (() => void)[] = [];
  readonly opened: Promise<void>;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('error', () => {});
    this.opened = new Promise((resolve) => this.socket.once('connect', () => resolve()));
    this.socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      while (this.#buffer.length >= 9) {
        const length = this.#buffer.readUIntBE(0, 3);
        if (this.#buffer.length < 9 + length) break;
        this.frames.push({
          type: this.#buffer[3]!,
          flags: this.#buffer[4]!,
          streamId: this.#buffer.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buffer.subarray(9, 9 + length),
        });
        this.#buffer = this.#buffer.subarray(9 + length);
      }
      this.#wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  /** Sends the preface and an empty SETTINGS frame, and acknowledges the server's SETTINGS. */
  async start(): Promise<void> {
    await this.opened;
    this.write(Buffer.concat([PREFACE, frame(FrameType.SETTINGS, 0, 0)]));
    await this.until((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) === 0);
    this.write(frame(FrameType.SETTINGS, Flag.ACK, 0));
  }

  write(bytes: Buffer): boolean {
    if (this.socket.destroyed) return false;
    return this.socket.write(bytes);
  }

  /** Resolves with the first frame (seen or to come) matching `match`, or undefined once the connection closed. */
  async until(match: (f: Frame) => boolean): Promise<Frame | undefined> {
    for (;;) {
      const found = this.frames.find(match);
      if (found !== undefined || this.closed) return found;
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Resolves once the connection has closed. */
  async whenClosed(): Promise<void> {
    while (!this.closed) await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  /** The GOAWAY the server sent, as its error code, if any. */
  goawayCode(): number | undefined {
    const goaway = this.frames.find((f) => f.type === FrameType.GOAWAY);
    return goaway === undefined ? undefined : goaway.payload.readUInt32BE(4);
  }

  destroy(): void {
    this.socket.destroy();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}
