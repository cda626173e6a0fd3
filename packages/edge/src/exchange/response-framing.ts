import { decodeResponseHead, isProtocolError, type ResponseHead } from '@tunnel2/protocol';
import { MAX_INTERIM_HEADS } from './informational.js';
import { type AcceptedHead, checkResponseHead, type HeadRequest } from './response-head-check.js';

/** A head the agent sent, as the public side may take it: accepted (interim or final), or why not. */
export type FramedHead =
  | { ok: true; head: ResponseHead; check: AcceptedHead }
  | { ok: false; problem: string };

/**
 * The framing rules one response from the agent must keep, whoever writes it out (a plain exchange, or an
 * upgrade's raw socket): a head the codec and `checkResponseHead` accept, a bounded number of interim
 * heads that never end the stream, and a body exactly as long as the final head declared. Pure counting,
 * no I/O: the caller writes, and turns each refusal into its own 502 or abort.
 */
export class ResponseFraming {
  readonly #request: HeadRequest;
  /** Interim (1xx) heads so far; past MAX_INTERIM_HEADS the agent is flooding. */
  #interim = 0;
  /**
   * Body bytes the response may still carry: what the final head declared (0 for HEAD, 204, 304),
   * `Infinity` when undeclared or before the final head. One subtraction and one comparison per chunk.
   */
  #left = Number.POSITIVE_INFINITY;

  constructor(request: HeadRequest) {
    this.#request = request;
  }

  /** Interim heads accepted so far. */
  get interim(): number {
    return this.#interim;
  }

  /** The body ended short of its declared length (it must be aborted, never ended as if complete). */
  get short(): boolean {
    return this.#left > 0 && this.#left !== Number.POSITIVE_INFINITY;
  }

  /**
   * A response head (interim or final) from the agent. A final head sets the body's declared length; an
   * interim head counts towards the flood limit and must not end the stream.
   */
  head(payload: Buffer, endStream: boolean): FramedHead {
    const decoded = decode(payload);
    if (!decoded.ok) return decoded;
    const { head } = decoded;
    // Checked before anything is written: once a head is out, a 502 can no longer replace it.
    const check = checkResponseHead(head, this.#request);
    if (!check.ok) return check;
    if (check.kind === 'interim') {
      if (endStream)
        return { ok: false, problem: `the stream ended after the interim status ${head.status}` };
      if (++this.#interim > MAX_INTERIM_HEADS)
        return { ok: false, problem: `more than ${MAX_INTERIM_HEADS} interim (1xx) responses` };
    } else this.#left = check.bodyLimit;
    return { ok: true, head, check };
  }

  /**
   * How many bytes of a body chunk of `length` fit in the declared length: all of them, or (fewer than
   * `length`) the response overran it, and the rest would be read as the next response on the connection.
   */
  fit(length: number): number {
    const before = this.#left;
    this.#left -= length;
    return this.#left < 0 ? before : length;
  }
}

/** A head the codec refuses (a status outside 100-999, truncated fields) is this stream's fault only. */
export function decode(payload: Buffer): { ok: true; head: ResponseHead } | { ok: false; problem: string } {
  try {
    return { ok: true, head: decodeResponseHead(payload) };
  } catch (err) {
    if (!isProtocolError(err)) throw err;
    return { ok: false, problem: err.message };
  }
}
