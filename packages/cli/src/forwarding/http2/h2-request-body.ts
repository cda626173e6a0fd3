import type { ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import { decodeRequestHead, type MuxStream } from '@tunnel2/protocol';
import { trailerObject } from './h2-fields.js';
import { type Queued, trailersMayFollow } from './queued-frames.js';

/** Frames of the tunnel stream that came while the backend session was being opened (queued-frames.ts). */
export type QueuedFrame = Queued;

/**
 * The request half of an HTTP/2 exchange (h2-exchange.ts): the body and trailers the edge sends after the
 * head, queued until the backend stream exists, then written to it. Credit for request bytes goes back to
 * the tunnel stream only once the backend stream took them (write() true, else its 'drain'), so a backend
 * that reads slowly holds the client back through the tunnel's window instead of growing a buffer here.
 */
export class H2RequestBody {
  readonly #stream: MuxStream;
  /** The head carried END_STREAM: there is no body to send (what still comes is only consumed). */
  headEnded = false;
  /** Called with a reason when the client's trailers cannot be sent on (the request is malformed). */
  readonly #refuse: (reason: string) => void;
  readonly #recorder: () => ExchangeRecorder | undefined;
  /** Frames that arrived before the backend stream existed, in order (bounded by the stream's window). */
  #queued: QueuedFrame[] | undefined = [];
  #h2: ClientHttp2Stream | undefined;
  #trailers: OutgoingHttpHeaders | undefined;
  /** Request bytes the backend stream buffered: their credit goes back when it takes them. */
  #owed = 0;

  constructor(
    stream: MuxStream,
    recorder: () => ExchangeRecorder | undefined,
    refuse: (reason: string) => void,
  ) {
    this.#stream = stream;
    this.#recorder = recorder;
    this.#refuse = refuse;
  }

  /** A second head from the edge: the request's trailers (PROTOCOL.md, request trailers). */
  trailers(payload: Buffer): void {
    if (this.#queued !== undefined) this.#queued.push({ trailers: payload });
    else this.#takeTrailers(payload);
  }

  data(chunk: Buffer): void {
    if (this.#queued !== undefined) {
      this.#queued.push({ data: chunk });
      return;
    }
    this.#recorder()?.requestData(chunk);
    this.#write(chunk);
  }

  end(): void {
    if (this.#queued !== undefined) this.#queued.push({ end: true });
    else this.#end();
  }

  /**
   * The frames queued so far, no longer queued: for the exchange an https:// backend's ALPN choice of
   * HTTP/1.1 hands them to, or to be consumed when no backend stream will take them. What comes after is
   * written (to no stream: consumed).
   */
  takeQueued(): QueuedFrame[] {
    const queued = this.#queued ?? [];
    this.#queued = undefined;
    return queued;
  }

  /**
   * Whether request trailers may still follow what came so far: the backend stream is opened with
   * `waitForTrailers` only then (queued-frames.ts says what that saves a unary gRPC call).
   */
  trailersMayFollow(): boolean {
    return trailersMayFollow(this.#queued ?? []);
  }

  /**
   * The backend stream the body goes to (again, for a replay): the queued frames are written to it now.
   * `on` adds a listener that comes off the stream as it closes (stream-listeners.ts).
   */
  attach(h2: ClientHttp2Stream, on: ClientHttp2Stream['on']): void {
    this.#h2 = h2;
    const queued = this.takeQueued();
    // Credit owed for bytes the backend stream buffered goes back when they are taken: at 'drain', or at
    // 'finish' (node emits no 'drain' once end() was called, so the body's last bytes would stay owed,
    // holding the tunnel stream open and their share of the session's window for good), or at 'close'.
    on('drain', () => this.pay());
    on('finish', () => this.pay());
    on('wantTrailers', () => {
      // A stream cancelled meanwhile (its close() ends the writable side first) has nothing to send.
      if (h2.closed || h2.destroyed) return;
      try {
        h2.sendTrailers(this.#trailers ?? {});
      } catch (err) {
        // Trailer fields node:http2 will not send (a single-value field twice, a name that is no token):
        // the client's request is malformed. It costs this stream, never the agent (a throw here is
        // uncaught).
        this.#refuse(`request trailers refused: ${(err as Error).message}`);
      }
    });
    for (const frame of queued) {
      if ('data' in frame) this.data(frame.data);
      else if ('trailers' in frame) this.#takeTrailers(frame.trailers);
      else this.#end();
    }
  }

  /** Gives back the credit of bytes the backend stream has taken since they were owed. */
  pay(): void {
    if (this.#owed === 0 || this.#stream.closed) return;
    const owed = this.#owed;
    this.#owed = 0;
    this.#stream.consume(owed);
  }

  #write(chunk: Buffer): void {
    const h2 = this.#h2;
    if (h2 === undefined || h2.closed || h2.destroyed || this.headEnded) {
      this.#stream.consume(chunk.length);
      return;
    }
    if (h2.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  #end(): void {
    if (this.headEnded) return;
    const h2 = this.#h2;
    if (h2 !== undefined && !h2.closed && !h2.destroyed) h2.end();
  }

  #takeTrailers(payload: Buffer): void {
    try {
      this.#trailers = trailerObject(decodeRequestHead(payload).headers);
    } catch {
      // A malformed trailer head carries nothing the backend could use; the body still ends.
    }
  }
}
