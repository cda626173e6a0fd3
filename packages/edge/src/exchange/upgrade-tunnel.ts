import type { Duplex } from 'node:stream';
import { type MuxStream, type ResponseHead, withoutHopByHop } from '@tunnel2/protocol';
import { rejectUpgrade } from '../answers/error-response.js';
import type { EdgeErrorCode } from '../errors.js';
import { serializeResponseHead } from './raw-http.js';
import type { AcceptedHead } from './response-head-check.js';
import { UpgradeStreamCore, type UpgradeTunnelContext } from './upgrade-stream-core.js';

export type { UpgradeTunnelContext } from './upgrade-stream-core.js';

/**
 * A public WebSocket (or any accepted upgrade) carried over one stream. Until the backend answers, this is
 * an ordinary request; after a 101 the stream carries raw bytes both ways under the same flow control.
 * A refusal (any other status) is written back with its body, then the connection closes. What happens on
 * the tunnel stream is `UpgradeStreamCore`'s; this is the raw socket's side.
 */
export class UpgradeTunnel extends UpgradeStreamCore {
  readonly #socket: Duplex;

  constructor(socket: Duplex, stream: MuxStream, context: UpgradeTunnelContext) {
    super(stream, context);
    this.#socket = socket;
    socket.on('drain', this.onClientDrain);
    socket.on('close', this.onClientClose);
    socket.on('error', () => {});
  }

  /**
   * Client bytes (the WebSocket frames after the handshake) flow into the stream with backpressure, from
   * the start: a client may send its first message before the 101, and the agent holds it (within the
   * stream's window) until its backend switched.
   */
  pumpClientBytes(head: Buffer): void {
    if (head.length > 0) this.stream.write(head);
    this.#socket.on('data', (chunk: Buffer) => {
      if (!this.stream.write(chunk)) this.#socket.pause();
    });
    this.#socket.on('end', this.#onSocketEnd);
  }

  protected writeHead(head: ResponseHead, check: AcceptedHead): undefined {
    // A 101 keeps its Connection/Upgrade fields; a refusal is a normal response that ends the connection.
    const headers =
      check.kind === 'switch' ? check.headers : [...withoutHopByHop(check.headers), 'Connection', 'close'];
    this.#socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
    return undefined;
  }

  protected writeToClient(chunk: Buffer): boolean {
    return this.#socket.write(chunk);
  }

  protected endClient(): void {
    this.#socket.end();
  }

  protected abortClient(): void {
    this.#socket.destroy();
  }

  protected answerError(code: EdgeErrorCode, message: string): void {
    rejectUpgrade(this.#socket, { code, message });
  }

  protected resumeClient(): void {
    this.#socket.resume();
  }

  /**
   * The client's FIN. After an answer it is a half-close, passed on. Before one, the client is gone, as
   * Node's HTTP server takes a FIN while a plain request waits for its answer: the stream is cancelled, so
   * the agent closes its backend connection now, not at the response timeout.
   */
  readonly #onSocketEnd = (): void => {
    if (this.headSent) this.stream.end();
    else if (!this.done) this.#socket.destroy();
  };
}
