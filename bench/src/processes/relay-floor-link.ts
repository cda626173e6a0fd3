import type { OnReadOpts, Socket } from 'node:net';

/*
 * The shared connection of the floor relay (relay-floor-process.ts) and the end sockets multiplexed over it:
 * frames of an 8-byte header (stream id u32, length u32; a length of 0xffffffff closes the stream) and the
 * bytes. Backpressure is the simplest bounded scheme, with no per-stream windows: when the link's write
 * answers false every end socket pauses until the link drains; when an end socket's write answers false the
 * link pauses until that socket drains. So neither process holds more than about one read per stream beyond
 * the sockets' high-water marks, whatever is moved, and one slow end stalls the whole link (head-of-line
 * blocking, which a bare floor accepts and a tunnel may not).
 */

const HEADER_BYTES = 8;
const CLOSE = 0xffffffff;

/** The kernel-level levers of the floor (bench/README.md, "TCP floor levers"); the defaults are the HTTP floor's. */
export interface RelayLevers {
  /** setNoDelay on every socket (default true). */
  noDelay: boolean;
  /**
   * > 0: writes to a socket are corked and handed to the kernel in one writev once this many bytes are
   * queued or the event loop has no more reads to deliver (setImmediate), whichever comes first. 0: each frame
   * is written at once (header and payload in one writev).
   */
  coalesceBytes: number;
  /** > 0: each read of a socket this process connects (not of accepted ones: net cannot) takes up to this many bytes. 0: libuv's 64 KiB. */
  readBytes: number;
}

export const DEFAULT_LEVERS: RelayLevers = { noDelay: true, coalesceBytes: 0, readBytes: 0 };

function header(id: number, length: number): Buffer {
  const head = Buffer.allocUnsafe(HEADER_BYTES);
  head.writeUInt32BE(id, 0);
  head.writeUInt32BE(length, 4);
  return head;
}

/** Writes to one socket, coalesced when asked; answers the socket's write verdict (false: wait for 'drain'). */
export type SocketWriter = (chunks: readonly Buffer[]) => boolean;

export function createWriter(socket: Socket, coalesceBytes: number): SocketWriter {
  if (coalesceBytes <= 0) {
    return (chunks) => {
      if (chunks.length === 1) return socket.write(chunks[0]!);
      socket.cork();
      let ok = true;
      for (const chunk of chunks) ok = socket.write(chunk);
      socket.uncork();
      return ok;
    };
  }
  let queued = 0;
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (queued === 0) return;
    queued = 0;
    socket.uncork();
  };
  return (chunks) => {
    if (queued === 0) socket.cork();
    let ok = true;
    for (const chunk of chunks) {
      ok = socket.write(chunk);
      queued += chunk.length;
    }
    if (queued >= coalesceBytes) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
    return ok;
  };
}

/** Hands every body byte of `socket` to `onData`; with `readBytes` > 0 through net's `onread` with fresh buffers. */
export function readOptions(
  readBytes: number,
  onData: () => (chunk: Buffer) => void,
): { onread: OnReadOpts } | undefined {
  if (readBytes <= 0) return undefined;
  let handler: ((chunk: Buffer) => void) | undefined;
  return {
    onread: {
      // A fresh buffer per read: the payload is written on as a view, and a reused one would be overwritten.
      buffer: () => Buffer.allocUnsafe(readBytes),
      callback: (n, buf) => {
        handler ??= onData();
        handler(Buffer.from(buf.buffer, buf.byteOffset, n));
        return true;
      },
    },
  };
}

/** One side of the relay: the link, and the end sockets (clients at the edge, backend connections at the agent). */
export class RelayLink {
  readonly #link: Socket;
  readonly #write: SocketWriter;
  readonly #levers: RelayLevers;
  readonly #ends = new Map<number, { socket: Socket; write: SocketWriter }>();
  /** End sockets whose write answered false and that have not drained: the link reads again at 0. */
  readonly #waiting = new Set<Socket>();
  #linkBlocked = false;
  /** The first bytes of a header split across reads. */
  #head: Buffer | null = null;
  /** The frame whose payload is arriving, and how many of its bytes are still to come. */
  #frameId = 0;
  #frameLeft = 0;
  /** Opens and attaches the end socket of a stream the other side started (the agent; the edge drops them). */
  readonly #open: (id: number) => void;

  constructor(link: Socket, levers: RelayLevers, open: (id: number) => void) {
    this.#link = link;
    this.#open = open;
    this.#levers = levers;
    this.#write = createWriter(link, levers.coalesceBytes);
    link.setNoDelay(levers.noDelay);
    link.on('close', () => {
      for (const end of this.#ends.values()) end.socket.destroy();
      this.#ends.clear();
    });
  }

  /**
   * The link's bytes: every read, whether through 'data' or `onread` (see readOptions). A payload is passed on
   * in the pieces it arrives in, as views: reassembling a 64 KiB frame that spans two reads would copy nearly
   * every byte of a bulk transfer once more, work no relay needs.
   */
  readonly onLinkData = (chunk: Buffer): void => {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.#frameLeft > 0) {
        const piece = chunk.subarray(offset, offset + this.#frameLeft);
        offset += piece.length;
        this.#frameLeft -= piece.length;
        this.#deliver(this.#frameId, piece);
        continue;
      }
      let head: Buffer;
      if (this.#head === null && chunk.length - offset >= HEADER_BYTES) {
        head = chunk.subarray(offset, offset + HEADER_BYTES);
      } else {
        // A header split across reads: the only bytes ever joined, at most 8.
        const have = this.#head ?? Buffer.alloc(0);
        const part = chunk.subarray(offset, offset + HEADER_BYTES - have.length);
        this.#head = Buffer.concat([have, part]);
        if (this.#head.length < HEADER_BYTES) return;
        head = this.#head;
        this.#head = null;
        offset -= have.length;
      }
      offset += HEADER_BYTES;
      const id = head.readUInt32BE(0);
      const length = head.readUInt32BE(4);
      if (length === CLOSE) this.#closeEnd(id);
      else {
        this.#frameId = id;
        this.#frameLeft = length;
      }
    }
  };

  /** Carries an end socket's bytes as stream `id`; its 'data' (or onread) must call the answered function. */
  attach(id: number, socket: Socket): (chunk: Buffer) => void {
    socket.setNoDelay(this.#levers.noDelay);
    this.#ends.set(id, { socket, write: createWriter(socket, this.#levers.coalesceBytes) });
    if (this.#linkBlocked) socket.pause();
    socket.on('drain', () => this.#drained(socket));
    socket.on('close', () => {
      this.#drained(socket);
      if (this.#ends.delete(id)) this.#send([header(id, CLOSE)]);
    });
    socket.on('error', () => socket.destroy());
    return (chunk) => this.#send([header(id, chunk.length), chunk]);
  }

  #send(chunks: readonly Buffer[]): void {
    if (this.#write(chunks) || this.#linkBlocked) return;
    this.#linkBlocked = true;
    for (const end of this.#ends.values()) end.socket.pause();
    this.#link.once('drain', () => {
      this.#linkBlocked = false;
      for (const end of this.#ends.values()) end.socket.resume();
    });
  }

  #deliver(id: number, payload: Buffer): void {
    if (!this.#ends.has(id)) this.#open(id);
    const end = this.#ends.get(id);
    if (end === undefined) return;
    if (end.write([payload]) || this.#waiting.has(end.socket)) return;
    this.#waiting.add(end.socket);
    this.#link.pause();
  }

  #drained(socket: Socket): void {
    if (!this.#waiting.delete(socket)) return;
    if (this.#waiting.size === 0) this.#link.resume();
  }

  #closeEnd(id: number): void {
    const end = this.#ends.get(id);
    if (end === undefined) return;
    this.#ends.delete(id);
    end.socket.end();
  }
}
