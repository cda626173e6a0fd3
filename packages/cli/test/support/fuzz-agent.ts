import { once } from 'node:events';
import {
  decodeRequestHead,
  type Frame,
  FrameDecoder,
  FrameType,
  MAX_FRAME_LENGTH_FIELD,
  parseGoAway,
} from '@tunnel2/protocol';
import WebSocket from 'ws';

export interface EdgeStream {
  id: number;
  target: string;
}

/**
 * The fuzzer's end of one agent session: a bare WebSocket that sends whatever bytes it is given (no MuxSession,
 * so nothing on this side corrects a frame) and decodes what the edge sends back, to learn the streams the edge
 * opens, its HELLO ACK and its GOAWAY. It can stop reading its socket, as a stuck agent would.
 */
export class FuzzAgent {
  readonly name: string;
  readonly #ws: WebSocket;
  readonly #decoder: FrameDecoder;
  /** Streams the edge opened (id and request target) not yet claimed by `nextEdgeStream`, oldest first. */
  readonly #edgeStreams: EdgeStream[] = [];
  #wake: (() => void) | undefined;
  helloAcked = false;
  /** The error code of the edge's GOAWAY, if it sent one. */
  goAwayCode: number | undefined;
  /** The WebSocket close code, once closed. */
  closeCode: number | undefined;
  /** Set when the edge sent bytes that are not valid frames: the edge must never do that. */
  edgeFrameError: Error | undefined;
  readonly closed: Promise<void>;

  private constructor(name: string, ws: WebSocket) {
    this.name = name;
    this.#ws = ws;
    this.#decoder = new FrameDecoder({
      maxFrameSize: MAX_FRAME_LENGTH_FIELD,
      onFrame: (frame) => this.#onFrame(frame),
    });
    ws.on('message', (data: Buffer) => {
      if (this.edgeFrameError !== undefined) return;
      try {
        this.#decoder.push(data);
      } catch (err) {
        this.edgeFrameError = err as Error;
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

  /** Opens the WebSocket as agent `name`; resolves once it is open (no HELLO is sent). */
  static async open(url: string, name: string): Promise<FuzzAgent> {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/_tunnel2/connect?name=${name}`, {
      perMessageDeflate: false,
      headers: { 'x-tunnel2-agent-key': `fuzz-${name}` },
    });
    const agent = new FuzzAgent(name, ws);
    await Promise.race([once(ws, 'open'), agent.closed]);
    return agent;
  }

  get open(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }
  /** Bytes handed to our WebSocket that the kernel has not taken yet: grows when the edge stops reading. */
  get bufferedAmount(): number {
    return this.#ws.bufferedAmount;
  }

  send(message: Buffer): void {
    if (this.open) this.#ws.send(message, { binary: true });
  }

  /** Stops reading the socket: the edge's writes pile up in the kernel, then in the edge. */
  pause(): void {
    if (this.open) this.#ws.pause();
  }
  resume(): void {
    if (this.open) this.#ws.resume();
  }

  /** The next stream the edge opened towards us, waiting for it up to `timeoutMs`. */
  async nextEdgeStream(timeoutMs: number): Promise<EdgeStream | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.#edgeStreams.length === 0 && this.closeCode === undefined && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    return this.#edgeStreams.shift();
  }

  /** Resolves once the edge's HELLO ACK arrived (true) or the session ended or `timeoutMs` passed (false). */
  async helloAck(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.helloAcked && this.closeCode === undefined && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = undefined;
    }
    return this.helloAcked;
  }

  /** Waits up to `timeoutMs` for the edge to close the session; true if it did. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.closed,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return this.closeCode !== undefined;
  }

  /** Drops the connection without a close handshake, as a crashed agent would. */
  async terminate(): Promise<void> {
    this.#ws.terminate();
    await this.closed;
  }

  #onFrame(frame: Frame): void {
    switch (frame.type) {
      case FrameType.HELLO:
        this.helloAcked = true;
        break;
      case FrameType.HEADERS:
        // The edge opens streams with odd ids; a HEADERS it sends on one is a request head.
        if (frame.streamId % 2 === 1) {
          let target: string;
          try {
            target = decodeRequestHead(frame.payload).target;
          } catch (err) {
            this.edgeFrameError = err as Error;
            break;
          }
          this.#edgeStreams.push({ id: frame.streamId, target });
        }
        break;
      case FrameType.GOAWAY:
        this.goAwayCode = parseGoAway(frame.payload).code;
        break;
    }
    this.#wake?.();
  }
}
