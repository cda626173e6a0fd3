import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import { ErrorCode, encodeResponseHead, type MuxStream, type RawHeaders } from '@tunnel2/protocol';
import { FLAG_END_STREAM, H2_CANCEL, H2_NO_ERROR, responseFields } from './h2-fields.js';

/** What the response half tells the exchange it belongs to. */
export interface ResponseOutcome {
  /** The backend's head cannot be carried (larger than a tunnel frame): the agent answers instead. */
  failBeforeHead(error: Error): void;
  /** The exchange ended: complete (`error` undefined) or not. */
  report(error: string | undefined, code?: string): void;
}

/**
 * The response half of an HTTP/2 exchange (h2-exchange.ts): the backend stream's interim heads, final head,
 * body and trailers, sent on as the tunnel's frames (a trailers-only answer as one final head with
 * END_STREAM). The backend stream is paused while the tunnel stream has no credit, and the response's end
 * (its trailers) waits for the body's last bytes to be taken.
 */
export class H2ResponseRelay {
  /** The final status sent on (or the agent's own answer's, set by the exchange). */
  status = 0;
  /** Body bytes the backend sent. */
  bytes = 0;
  /** A final head went to the client: the request cannot be sent again, nor answered by the agent. */
  started = false;
  readonly #stream: MuxStream;
  readonly #maxHeadSize: number;
  readonly #recorder: () => ExchangeRecorder | undefined;
  readonly #outcome: ResponseOutcome;
  #h2: ClientHttp2Stream | undefined;
  #trailers: RawHeaders | undefined;
  /** The tunnel stream took the last chunk only into its queue (write() false): no onDrain since. */
  #awaitingCredit = false;
  /** The backend's response ended while #awaitingCredit: its end (trailers) goes at the next drain. */
  #endAfterDrain = false;

  constructor(
    stream: MuxStream,
    maxHeadSize: number,
    recorder: () => ExchangeRecorder | undefined,
    outcome: ResponseOutcome,
  ) {
    this.#stream = stream;
    this.#maxHeadSize = maxHeadSize;
    this.#recorder = recorder;
    this.#outcome = outcome;
  }

  /** The response ended complete and its end waits for the client's credit: the exchange is not over. */
  get endPending(): boolean {
    return this.#endAfterDrain;
  }

  /**
   * Listens to the backend stream's answer (again, for a replay), through `on`: listeners that come off the
   * stream as it closes (stream-listeners.ts).
   */
  attach(h2: ClientHttp2Stream, on: ClientHttp2Stream['on']): void {
    this.#h2 = h2;
    on('headers', (headers, _flags, raw?: string[]) => this.#onInterim(headers, raw));
    on('response', (headers, flags, raw?: string[]) => this.#onResponse(headers, flags, raw));
    on('data', (chunk: Buffer) => {
      this.bytes += chunk.length;
      this.#recorder()?.responseData(chunk);
      if (!this.#stream.closed && !this.#stream.write(chunk)) {
        this.#awaitingCredit = true;
        h2.pause();
      }
    });
    on('trailers', (headers, _flags, raw?: string[]) => {
      this.#trailers = responseFields(raw, headers);
      this.#recorder()?.responseTrailers(this.#trailers);
    });
    // node:http2 also ends the readable side of a stream the backend reset with CANCEL (without an 'error'):
    // only an end with no reset code is the response's END_STREAM; the rest is read on 'close'.
    on('end', () => {
      if ((h2.rstCode ?? H2_NO_ERROR) === H2_NO_ERROR) this.#onEnd();
    });
  }

  /** The tunnel stream has credit again: the response's end that waited for it goes, or reading resumes. */
  drained(): void {
    this.#awaitingCredit = false;
    if (this.#endAfterDrain) {
      this.#endAfterDrain = false;
      this.#onEnd();
      return;
    }
    if (this.#h2?.isPaused()) this.#h2.resume();
  }

  #onInterim(headers: IncomingHttpHeaders, raw: string[] | undefined): void {
    const status = Number(headers[':status']);
    // 100 answered the edge's own Expect handling; a second one means nothing to the client.
    if (!(status > 100 && status < 200) || this.#stream.closed) return;
    let head: Buffer;
    try {
      head = encodeResponseHead(
        { status, statusMessage: '', headers: responseFields(raw, headers) },
        this.#maxHeadSize,
      );
    } catch {
      // An interim head larger than a tunnel frame: it only advises, so it is dropped and the final answer
      // still goes (a throw here would be uncaught).
      return;
    }
    this.#stream.sendHeaders(head, false);
  }

  #onResponse(headers: IncomingHttpHeaders, flags: number, raw: string[] | undefined): void {
    if (this.#stream.closed) return;
    const status = Number(headers[':status']);
    const fields = responseFields(raw, headers);
    let head: Buffer;
    try {
      head = encodeResponseHead({ status, statusMessage: '', headers: fields }, this.#maxHeadSize);
    } catch (err) {
      this.#h2?.close(H2_CANCEL);
      this.#outcome.failBeforeHead(err as Error);
      return;
    }
    this.status = status;
    this.started = true;
    this.#recorder()?.responseHead(status, fields, head);
    // A trailers-only answer (gRPC's errors): one final head with END_STREAM, as the backend sent it.
    const only = (flags & FLAG_END_STREAM) !== 0;
    this.#stream.sendHeaders(head, only);
  }

  #onEnd(): void {
    if (!this.started) return;
    // node:http2 ends a paused stream once its buffer is empty: the body's last bytes may still wait in the
    // tunnel stream for the client's credit, and trailers (END_STREAM) cannot go before them.
    if (this.#awaitingCredit && !this.#stream.closed) {
      this.#endAfterDrain = true;
      return;
    }
    // A trailers-only answer already ended the tunnel stream with its head (and the stream may be closed by
    // now, the request side having ended too): the exchange is complete all the same.
    if (!this.#stream.localEnded && !this.#stream.closed) {
      const trailers = this.#trailers;
      if (trailers !== undefined && trailers.length > 0) {
        let head: Buffer;
        try {
          head = encodeResponseHead({ status: 200, statusMessage: '', headers: trailers }, this.#maxHeadSize);
        } catch (err) {
          // Trailers larger than a tunnel frame: the body went, so the client must see the answer cut
          // rather than end as if complete (a throw here would be uncaught).
          this.#stream.reset(ErrorCode.BACKEND_ERROR);
          this.#outcome.report(
            `backend sent trailers the tunnel cannot carry: ${(err as Error).message}`,
            'invalid_trailers',
          );
          return;
        }
        this.#stream.sendHeaders(head, true);
      } else {
        this.#stream.end();
      }
    }
    this.#outcome.report(undefined);
  }
}
