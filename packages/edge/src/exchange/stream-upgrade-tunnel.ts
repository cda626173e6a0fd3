import { type MuxStream, type RawHeaders, type ResponseHead, withoutHopByHop } from '@tunnel2/protocol';
import { sendEdgeError } from '../answers/error-response.js';
import type { EdgeErrorCode } from '../errors.js';
import type { PublicMessage, PublicResponse } from './public-message.js';
import type { AcceptedHead } from './response-head-check.js';
import { UpgradeStreamCore, type UpgradeTunnelContext } from './upgrade-stream-core.js';

const { constants } = process.getBuiltinModule('node:http2');

/**
 * An RFC 8441 WebSocket (an HTTP/2 stream opened with extended CONNECT) carried over one tunnel stream, as
 * `UpgradeTunnel` carries an HTTP/1.1 one (what happens on the tunnel stream is `UpgradeStreamCore`'s):
 * the backend answers the upgrade the edge made of it; its 101 is the stream's `:status 200` (RFC 8441
 * §5), then bytes flow both ways as the h2 stream's DATA, each side paused while the other's window or
 * buffer is full. Any other answer is passed on as the h2 response, but a 2xx (it would read as accepted:
 * a 502). END_STREAM on either side ends the tunnel stream's side; a reset on either side resets the other.
 */
export class StreamUpgradeTunnel extends UpgradeStreamCore {
  readonly #req: PublicMessage;
  readonly #res: PublicResponse;

  constructor(req: PublicMessage, res: PublicResponse, stream: MuxStream, context: UpgradeTunnelContext) {
    super(stream, context);
    this.#req = req;
    this.#res = res;
    res.on('drain', this.onClientDrain);
    // The client's stream closed (ended both ways, or reset by it): the tunnel stream goes with it.
    res.on('close', this.onClientClose);
    req.on('error', () => {});
  }

  /**
   * Once the backend switched: the client's bytes (WebSocket frames) flow into the stream with
   * backpressure; its END_STREAM ends it. Not before: a message the client sends with its request waits
   * here, in the request's buffer and the h2 stream's window (bounded, as the agent bounds an HTTP/1.1
   * client's by the tunnel stream's), and an answer that refuses the upgrade never sees it.
   */
  #pumpClientBytes(): void {
    const req = this.#req;
    req.on('data', (chunk: Buffer) => {
      if (!this.stream.write(chunk)) req.pause();
    });
    req.on('end', () => {
      if (!this.stream.closed) this.stream.end();
    });
  }

  protected writeHead(head: ResponseHead, check: AcceptedHead): string | undefined {
    const switched = check.kind === 'switch';
    // RFC 8441 §5: every 2xx accepts the WebSocket; a backend that did not switch (it served the path as a
    // page) would have its body read as WebSocket frames.
    if (!switched && isSuccess(head.status))
      return `${head.status} to a WebSocket upgrade (only 101 accepts it)`;
    const res = this.#res;
    try {
      if (switched) res.writeHead(200, acceptedFields(check.headers));
      else res.writeHead(head.status, withoutHopByHop(check.headers));
    } catch (err) {
      // A status HTTP/2 has no form for (600-999), refused while a 502 can still replace it.
      return `Node refused it (${(err as Error).message})`;
    }
    // Sent now: a WebSocket server may wait for the client's first message before writing anything. (A
    // head with END_STREAM is followed by onEnd, from the stream.)
    if (switched) {
      res.flushHeaders();
      this.#pumpClientBytes();
    }
    return undefined;
  }

  protected writeToClient(chunk: Buffer): boolean {
    return this.#res.write(chunk);
  }

  protected endClient(): void {
    this.#res.end();
  }

  protected abortClient(cancelled: boolean): void {
    if (cancelled) this.#res.abortStream?.(constants.NGHTTP2_CANCEL);
    else this.#res.abortStream?.();
  }

  protected answerError(code: EdgeErrorCode, message: string): void {
    sendEdgeError(this.#res, code, message);
  }

  protected resumeClient(): void {
    this.#req.resume();
  }
}

/** A 2xx: what accepts an RFC 8441 WebSocket, so only the edge's mapping of a 101 may send one. */
export function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/**
 * The backend's 101 as the h2 `:status 200`: its HTTP/1.1 handshake fields go (Connection, Upgrade and the
 * Sec-WebSocket-Accept that answers the edge's key, not the client's), Sec-WebSocket-Protocol and
 * -Extensions and the rest pass on.
 */
export function acceptedFields(headers: RawHeaders): RawHeaders {
  const out = withoutHopByHop(headers);
  let write = 0;
  for (let read = 0; read < out.length; read += 2) {
    const name = out[read]!;
    if (name.length === 20 && name.toLowerCase() === 'sec-websocket-accept') continue;
    out[write] = name;
    out[write + 1] = out[read + 1]!;
    write += 2;
  }
  out.length = write;
  return out;
}
