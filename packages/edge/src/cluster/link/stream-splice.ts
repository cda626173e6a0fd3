import { ErrorCode, type MuxStream, type StreamHandler, type StreamResetError } from '@tunnel2/protocol';

/**
 * On a link stream, from the holder before any answer: the agent's session ended after the request head
 * went to it, so its backend may have run it. The ingress answers 502 TUNNEL_OFFLINE as one node does,
 * or (idempotent methods only, RFC 9110 §9.2.2) looks for the agent again. CANCEL, because a holder never
 * sends it otherwise before answering, and an ingress of an older version answers it with a 502.
 */
export const AGENT_LOST = ErrorCode.CANCEL;

/**
 * A reset the agent's side sent, as it goes on over the link. REFUSED_STREAM on a link means "not
 * processed here, send it elsewhere" (see node-link-server.ts), and SESSION_CLOSED is never sent: an
 * agent's refusal is passed on as the agent going away, its disconnection as AGENT_LOST (once the head
 * went to the agent, "not processed" is no longer known to be true).
 */
function linkCode(code: number, replica: boolean): number {
  // A replica's refusal is "not processed" still: the ingress node sends it to another holder of the name.
  if (code === ErrorCode.REFUSED_STREAM) return replica ? code : ErrorCode.GOING_AWAY;
  if (code === ErrorCode.SESSION_CLOSED) return AGENT_LOST;
  return code;
}

/** One direction of a splice: frames from `from` written to `to`, credit returned to `from` as `to` takes them. */
class Side implements StreamHandler {
  readonly #from: MuxStream;
  readonly #to: MuxStream;
  readonly #splice: StreamSplice;
  /** Bytes written to `to` while it was full: credited back to `from` on its drain. */
  owed = 0;

  constructor(from: MuxStream, to: MuxStream, splice: StreamSplice) {
    this.#from = from;
    this.#to = to;
    this.#splice = splice;
    from.handler = this;
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#to.closed) return;
    this.#to.sendHeaders(payload, endStream);
  }

  onData(chunk: Buffer): void {
    if (this.#to.write(chunk)) this.#from.consume(chunk.length);
    else this.owed += chunk.length;
  }

  onEnd(): void {
    this.#to.end();
  }

  onReset(error: StreamResetError): void {
    const code = error.protocolCode;
    if (this.#to === this.#splice.link) this.#to.reset(linkCode(code, this.#splice.replica));
    else this.#to.reset(code === ErrorCode.SESSION_CLOSED ? ErrorCode.CANCEL : code);
  }

  /** `from`'s peer may send again: the other side's bytes it held are credited to that side's source. */
  onDrain(): void {
    this.#splice.drained(this.#from);
  }

  creditOwed(): void {
    if (this.owed === 0) return;
    const owed = this.owed;
    this.owed = 0;
    this.#from.consume(owed);
  }
}

/**
 * The holder's relay between a link stream (from the ingress node) and its agent's stream: HEADERS
 * (request, interim, final, trailers), DATA, END and RESET both ways, frame by frame, without copying.
 * Credit is returned to one side only once the other side took the bytes (its `write()` returned true,
 * or it drained since): a slow client at the ingress holds the agent back, never this node's memory,
 * which stays within the two streams' windows. The link server sees the link stream close (its session's
 * onStreamClosed); the agent's stream closes with it, ended or reset from here.
 */
export class StreamSplice {
  readonly link: MuxStream;
  readonly #agent: MuxStream;
  readonly #up: Side;
  readonly #down: Side;

  /** The agent is one replica of its name: its REFUSED_STREAM goes on as is (linkCode). */
  readonly replica: boolean;

  constructor(link: MuxStream, agent: MuxStream, replica = false) {
    this.link = link;
    this.replica = replica;
    this.#agent = agent;
    this.#up = new Side(link, agent, this);
    this.#down = new Side(agent, link, this);
  }

  /** Request body bytes that came on the link before the agent's stream opened. */
  replay(chunks: readonly Buffer[], ended: boolean): void {
    for (const chunk of chunks) this.#up.onData(chunk);
    if (ended) this.#up.onEnd();
  }

  /** `stream` can take more: what was written to it while full is credited to the other side. */
  drained(stream: MuxStream): void {
    if (stream === this.#agent) this.#up.creditOwed();
    else this.#down.creditOwed();
  }
}
