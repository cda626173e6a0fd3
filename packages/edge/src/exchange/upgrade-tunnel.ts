import type { Duplex } from 'node:stream';
import {
  MAX_EARLY_UPGRADE_BYTES,
  type MuxStream,
  type ResponseHead,
  withoutHopByHop,
} from '@tunnel2/protocol';
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
  /** Client bytes sent on the stream before the answer (at most MAX_EARLY_UPGRADE_BYTES). */
  #early = 0;

  constructor(socket: Duplex, stream: MuxStream, context: UpgradeTunnelContext) {
    super(stream, context);
    this.#socket = socket;
    socket.on('drain', this.onClientDrain);
    socket.on('close', this.onClientClose);
    socket.on('error', () => {});
  }

  /**
   * Client bytes (the WebSocket frames after the handshake) flow into the stream with backpressure, from
   * the start: a client may send its first message before the 101, and the agent holds it until its
   * backend switched (and its share of the agent's session window with it); past MAX_EARLY_UPGRADE_BYTES the
   * rest waits for the answer, unread in the client's connection, as nginx leaves it. `head`, read with the request,
   * goes back into the socket to be counted the same way.
   */
  pumpClientBytes(head: Buffer): void {
    if (head.length > 0) this.#socket.unshift(head);
    this.#socket.on('data', this.#onSocketData);
    this.#socket.on('end', this.#onSocketEnd);
  }

  readonly #onSocketData = (chunk: Buffer): void => {
    let bytes = chunk;
    if (!this.headSent) {
      const room = MAX_EARLY_UPGRADE_BYTES - this.#early;
      if (chunk.length >= room) {
        // The limit reached: the rest goes back, unread, until the answer resumes the socket.
        this.#socket.pause();
        if (chunk.length > room) this.#socket.unshift(chunk.subarray(room));
        bytes = chunk.subarray(0, room);
      }
      this.#early += bytes.length;
      if (bytes.length === 0) return;
    }
    if (!this.stream.write(bytes)) this.#socket.pause();
  };

  protected writeHead(head: ResponseHead, check: AcceptedHead): undefined {
    // A 101 keeps its Connection/Upgrade fields; a refusal is a normal response that ends the connection.
    const headers =
      check.kind === 'switch' ? check.headers : [...withoutHopByHop(check.headers), 'Connection', 'close'];
    this.#socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
    // Bytes held back by the limit flow now (resume() emits them from the next tick, once the answer is
    // marked sent). If the stream has no credit, the first write pauses the socket again.
    if (this.#early >= MAX_EARLY_UPGRADE_BYTES) this.#socket.resume();
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
    // Credit back before the answer does not lift the early limit.
    if (!this.headSent && this.#early >= MAX_EARLY_UPGRADE_BYTES) return;
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
