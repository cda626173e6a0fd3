import {
  ErrorCode,
  type MuxStream,
  type RawHeaders,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { sendEdgeError } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import type { PublicMessage, PublicResponse } from './public-message.js';
import { ResponseFraming } from './response-framing.js';
import type { UpgradeTunnelContext } from './upgrade-tunnel.js';

const { constants } = process.getBuiltinModule('node:http2');

/**
 * An RFC 8441 WebSocket (an HTTP/2 stream opened with extended CONNECT) carried over one tunnel stream, as
 * `UpgradeTunnel` carries an HTTP/1.1 one: the backend answers the upgrade the edge made of it; its 101 is
 * the stream's `:status 200` (RFC 8441 §5), then bytes flow both ways as the h2 stream's DATA, each side
 * paused while the other's window or buffer is full. Any other answer is passed on as the h2 response, but
 * a 2xx (it would read as accepted: a 502).
 * END_STREAM on either side ends the tunnel stream's side; a reset on either side resets the other.
 */
export class StreamUpgradeTunnel implements StreamHandler {
  readonly #req: PublicMessage;
  readonly #res: PublicResponse;
  readonly #stream: MuxStream;
  readonly #context: UpgradeTunnelContext;
  #timer: NodeJS.Timeout | undefined;
  #headSent = false;
  #done = false;
  /** Bytes written to the client while its stream was full: credit handed back on its 'drain'. */
  #owed = 0;
  readonly #framing = new ResponseFraming({ method: 'GET', upgrade: true });

  constructor(req: PublicMessage, res: PublicResponse, stream: MuxStream, context: UpgradeTunnelContext) {
    this.#req = req;
    this.#res = res;
    this.#stream = stream;
    this.#context = context;
    stream.handler = this;
    this.#timer = setTimeout(this.#onTimeout, context.responseTimeoutMs);
    res.on('drain', this.#onClientDrain);
    res.on('close', this.#onClientClose);
    req.on('error', () => {});
  }

  /**
   * Once the backend switched: the client's bytes (WebSocket frames) flow into the stream with
   * backpressure; its END_STREAM ends it. Not before: the agent has no backend socket to write them to
   * until the 101 (it would drop them), so a message the client sends with its request waits here, in
   * the request's buffer and the h2 stream's window (bounded), and an answer that refuses the upgrade
   * never sees it.
   */
  #pumpClientBytes(): void {
    const req = this.#req;
    req.on('data', (chunk: Buffer) => {
      if (!this.#stream.write(chunk)) req.pause();
    });
    req.on('end', () => {
      if (!this.#stream.closed) this.#stream.end();
    });
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#headSent || this.#done) return;
    const framed = this.#framing.head(payload, endStream);
    if (!framed.ok) {
      this.#invalidHead(framed.problem);
      return;
    }
    const { head, check } = framed;
    // Interim heads are not relayed on an upgrade (the framing still counts them against a flood).
    if (check.kind === 'interim') return;
    if (check.kind !== 'switch' && isSuccess(head.status)) {
      // RFC 8441 §5: every 2xx accepts the WebSocket; a backend that did not switch (it served the path as
      // a page) would have its body read as WebSocket frames.
      this.#invalidHead(`${head.status} to a WebSocket upgrade (only 101 accepts it)`);
      return;
    }
    this.#clearTimer();
    const res = this.#res;
    try {
      if (check.kind === 'switch') res.writeHead(200, acceptedFields(check.headers));
      else res.writeHead(head.status, withoutHopByHop(check.headers));
    } catch (err) {
      // A status HTTP/2 has no form for (600-999), refused while a 502 can still replace it.
      this.#invalidHead(`Node refused it (${(err as Error).message})`);
      return;
    }
    this.#headSent = true;
    // Sent now: a WebSocket server may wait for the client's first message before writing anything. (A
    // head with END_STREAM is followed by onEnd, from the stream.)
    if (check.kind === 'switch') {
      res.flushHeaders();
      this.#pumpClientBytes();
    }
  }

  onData(chunk: Buffer): void {
    if (this.#done) return;
    if (!this.#headSent) {
      this.#invalidHead('body bytes before a final response head');
      return;
    }
    const fit = this.#framing.fit(chunk.length);
    if (fit < chunk.length) {
      // A refusal's body past its declared length: what fits is written, then the stream is aborted.
      if (fit > 0) this.#res.write(chunk.subarray(0, fit));
      this.#abort();
      return;
    }
    if (this.#res.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  onEnd(): void {
    if (this.#done) return;
    this.#clearTimer();
    if (!this.#headSent) {
      this.#fail(EdgeErrorCode.STREAM_FAILED, `tunnel ${this.#context.name}: agent ended without a response`);
      return;
    }
    if (this.#framing.short) {
      this.#abort();
      return;
    }
    this.#res.end();
    this.#finish();
  }

  onReset(error: StreamResetError): void {
    this.#clearTimer();
    if (this.#headSent) this.#res.abortStream?.(constants.NGHTTP2_CANCEL);
    else {
      const offline = error.protocolCode === ErrorCode.SESSION_CLOSED;
      this.#fail(
        offline ? EdgeErrorCode.TUNNEL_OFFLINE : EdgeErrorCode.STREAM_FAILED,
        offline
          ? `tunnel ${this.#context.name} is offline`
          : `tunnel ${this.#context.name}: the upgrade failed`,
      );
    }
    this.#finish();
  }

  onDrain(): void {
    this.#req.resume();
  }

  #invalidHead(problem: string): void {
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#fail(
      EdgeErrorCode.STREAM_FAILED,
      `tunnel ${this.#context.name}: the backend sent an invalid response head: ${problem}`,
    );
  }

  #abort(): void {
    this.#clearTimer();
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#res.abortStream?.();
    this.#finish();
  }

  #fail(code: EdgeErrorCode, message: string): void {
    sendEdgeError(this.#res, code, message);
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#context.onFinish();
  }

  readonly #onTimeout = (): void => {
    this.#timer = undefined;
    if (this.#headSent) return;
    this.#stream.reset(ErrorCode.CANCEL);
    this.#fail(
      EdgeErrorCode.RESPONSE_TIMEOUT,
      `tunnel ${this.#context.name}: no answer to the upgrade within ${this.#context.responseTimeoutMs} ms`,
    );
  };

  readonly #onClientDrain = (): void => {
    if (this.#owed === 0) return;
    const owed = this.#owed;
    this.#owed = 0;
    this.#stream.consume(owed);
  };

  /** The client's stream closed (ended both ways, or reset by it): the tunnel stream goes with it. */
  readonly #onClientClose = (): void => {
    this.#clearTimer();
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.CANCEL);
    this.#finish();
  };

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
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
