import type { Socket } from 'node:net';

/*
 * The framing of the HTTP floor relay (http-relay-floor-process.ts): stream id (u32), then one u32 holding
 * the frame's kind in its top byte and the payload's length in the other three, then the payload. Just
 * enough to carry a request head, body chunks and an end marker each way over one TCP connection; nothing
 * here is tunnel2's protocol, which also carries credit, limits, versions and error codes.
 */

export const FrameKind = {
  /** A head (JSON); the body follows as DATA frames and an END. */
  HEAD: 1,
  /** A request head with no body: nothing follows. */
  HEAD_END: 2,
  DATA: 3,
  END: 4,
  /** The stream failed on the sender's side (backend error, client gone). */
  RESET: 5,
} as const;

export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

const HEADER_BYTES = 8;
const MAX_PAYLOAD = 0xffffff;
const EMPTY = Buffer.alloc(0);

/**
 * Writes frames on the shared connection. The socket stays corked until the end of the current tick, so
 * the frames one event produces (a response's head, its body and its end, parsed from one backend read)
 * leave in one writev: one syscall per event-loop turn, not one per frame.
 */
export class FrameWriter {
  readonly #socket: Socket;
  #corked = false;

  constructor(socket: Socket) {
    this.#socket = socket;
  }

  /** Answers false when the connection's buffer is full: the caller pauses its source until 'drain'. */
  send(id: number, kind: FrameKind, payload: Buffer = EMPTY): boolean {
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      process.nextTick(this.#flush);
    }
    let rest = payload;
    do {
      const part = rest.length > MAX_PAYLOAD ? rest.subarray(0, MAX_PAYLOAD) : rest;
      const head = Buffer.allocUnsafe(HEADER_BYTES);
      head.writeUInt32BE(id, 0);
      head.writeUInt32BE(((kind << 24) | part.length) >>> 0, 4);
      this.#socket.write(head);
      if (part.length > 0) this.#socket.write(part);
      rest = rest.subarray(part.length);
    } while (rest.length > 0);
    return !this.#socket.writableNeedDrain;
  }

  readonly #flush = (): void => {
    this.#corked = false;
    this.#socket.uncork();
  };
}

/** Cuts the shared connection's bytes into frames; payloads are views of what was read, not copies. */
export class FrameReader {
  readonly #onFrame: (id: number, kind: number, payload: Buffer) => void;
  /** The start of a frame whose rest has not arrived yet. */
  #partial: Buffer = EMPTY;

  constructor(onFrame: (id: number, kind: number, payload: Buffer) => void) {
    this.#onFrame = onFrame;
  }

  push(chunk: Buffer): void {
    let data = this.#partial.length === 0 ? chunk : Buffer.concat([this.#partial, chunk]);
    while (data.length >= HEADER_BYTES) {
      const word = data.readUInt32BE(4);
      const end = HEADER_BYTES + (word & MAX_PAYLOAD);
      if (data.length < end) break;
      this.#onFrame(data.readUInt32BE(0), word >>> 24, data.subarray(HEADER_BYTES, end));
      data = data.subarray(end);
    }
    this.#partial = data;
  }
}

// What describes one hop only (RFC 9110 §7.6.1), plus Expect, which undici refuses.
const hopByHop = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

/** A flat raw header list (name, value, …) without its hop-by-hop fields. */
export function endToEnd(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (!hopByHop.has(name.toLowerCase())) out.push(name, raw[i + 1]!);
  }
  return out;
}
