import { once } from 'node:events';
import {
  decodeResponseHead,
  type Frame,
  FrameDecoder,
  FrameType,
  type Hello,
  MAX_FRAME_LENGTH_FIELD,
  parseGoAway,
  parseHello,
} from '@tunnel2/protocol';
import WebSocket from 'ws';

/**
 * The link fuzzer's end of one node link: a bare WebSocket to the target's link path, opened with a link
 * signature the fuzzer made with the cluster secret (it is a node as far as the target can tell), that
 * sends whatever bytes it is given (no MuxSession on this side) and decodes what the target sends back:
 * its HELLO, the response heads on the streams the fuzzer opened, its GOAWAY. Like FuzzAgent, it can stop
 * reading its socket.
 */
export class FuzzNode {
  readonly #ws: WebSocket;
  readonly #decoder: FrameDecoder;
  #wake: (() => void) | undefined;
  /** The target's HELLO, once it came (it speaks first on a link, as an edge does to an agent). */
  hello: Hello | undefined;
  /** The streams on which the target sent a response head (requests it served, or refused with a response). */
  readonly answered = new Set<number>();
  /** RESETs the target sent. */
  resets = 0;
  goAwayCode: number | undefined;
  closeCode: number | undefined;
  /** Set when the target sent bytes that are not valid frames or heads: it must never do that. */
  targetFrameError: Error | undefined;
  readonly closed: Promise<void>;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    this.#decoder = new FrameDecoder({
      maxFrameSize: MAX_FRAME_LENGTH_FIELD,
      onFrame: (frame) => this.#onFrame(frame),
    });
    ws.on('message', (data: Buffer) => {
      if (this.targetFrameError !== undefined) return;
      try {
        this.#decoder.push(data);
      } catch (err) {
        this.targetFrameError = err as Error;
      }
    });
    ws.on('error', () => {});
    this.closed = new Promise((resolve) =>
      ws.once('close', (code: number) => {
        this.closeCode = code;
        this.#wake?.();
        resolve();
      }),
    );
  }

  /** Opens the link with these upgrade headers; resolves once open, or refused (then `closeCode` is set). */
  static async open(url: string, path: string, headers: Record<string, string>): Promise<FuzzNode> {
    const ws = new WebSocket(`${url.replace('http', 'ws')}${path}`, { perMessageDeflate: false, headers });
    const node = new FuzzNode(ws);
    await Promise.race([once(ws, 'open'), node.closed]);
    return node;
  }

  get open(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  /** Bytes handed to our WebSocket that the kernel has not taken yet: grows when the target stops reading. */
  get bufferedAmount(): number {
    return this.#ws.bufferedAmount;
  }

  send(message: Buffer): void {
    if (this.open) this.#ws.send(message, { binary: true });
  }

  pause(): void {
    if (this.open) this.#ws.pause();
  }

  resume(): void {
    if (this.open) this.#ws.resume();
  }

  /** Resolves once `done()` holds, the link closed, or `timeoutMs` passed; answers `done()`. */
  async until(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done() && this.closeCode === undefined && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    return done();
  }

  /** Waits up to `timeoutMs` for the target to close the link; true if it did. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    await this.until(() => this.closeCode !== undefined, timeoutMs);
    return this.closeCode !== undefined;
  }

  /** Drops the connection without a close handshake, as a crashed node would. */
  async terminate(): Promise<void> {
    this.#ws.terminate();
    await this.closed;
  }

  #onFrame(frame: Frame): void {
    try {
      switch (frame.type) {
        case FrameType.HELLO:
          this.hello ??= parseHello(frame.payload);
          break;
        case FrameType.HEADERS:
          // Our streams are odd (the dialing node opens them): a HEADERS on one is a response head.
          if (frame.streamId % 2 === 1) {
            decodeResponseHead(frame.payload);
            this.answered.add(frame.streamId);
          }
          break;
        case FrameType.RESET:
          this.resets++;
          break;
        case FrameType.GOAWAY:
          this.goAwayCode = parseGoAway(frame.payload).code;
          break;
      }
    } catch (err) {
      this.targetFrameError = err as Error;
    }
    this.#wake?.();
  }
}
