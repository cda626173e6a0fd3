import { type FloodLimits, resolveFloodLimits } from '../config.js';
import { ErrorCode } from '../constants.js';
import { ProtocolError, ProtocolErrorCode } from '../errors.js';

/**
 * A session's flood bounds (FloodLimits, PROTOCOL.md §9): answers the peer can provoke without limit (PING
 * ACKs, refusals of streams it opens) that are queued and not yet written, and empty DATA frames in a row.
 * Each check is an integer comparison and an increment; past a bound it throws FLOOD, which the session's
 * receive loop turns into GOAWAY ENHANCE_YOUR_CALM.
 */
export class FloodGuard {
  readonly #limits: FloodLimits;
  /** Answers in the batch or handed to the transport and not yet written. */
  #answersQueued = 0;
  /** Of those, the ones still in the batch: they stop counting once the batch's last message is written. */
  #answersInBatch = 0;
  #emptyFrames = 0;

  constructor(limits?: Partial<FloodLimits>) {
    this.#limits = resolveFloodLimits(limits);
  }

  /** An answer is about to be queued. Called only while a received frame is decoded. */
  answer(): void {
    if (this.#answersQueued >= this.#limits.maxQueuedAnswers) {
      throw new ProtocolError(
        ProtocolErrorCode.FLOOD,
        ErrorCode.ENHANCE_YOUR_CALM,
        `more than ${this.#limits.maxQueuedAnswers} answers (PING ACKs, stream refusals) queued to a peer that does not read them`,
      );
    }
    this.#answersQueued++;
    this.#answersInBatch++;
  }

  /** The batch is being written: returns its answers, to hand back to `written` once its last message is. */
  takeBatch(): number {
    const answers = this.#answersInBatch;
    this.#answersInBatch = 0;
    return answers;
  }

  written(answers: number): void {
    this.#answersQueued -= answers;
  }

  /** A DATA frame arrived; an empty one without END_STREAM counts towards the bound, any byte resets it. */
  data(length: number, endStream: boolean): void {
    if (length > 0) {
      this.#emptyFrames = 0;
    } else if (!endStream && ++this.#emptyFrames > this.#limits.maxConsecutiveEmptyFrames) {
      throw new ProtocolError(
        ProtocolErrorCode.FLOOD,
        ErrorCode.ENHANCE_YOUR_CALM,
        `more than ${this.#limits.maxConsecutiveEmptyFrames} empty DATA frames in a row`,
      );
    }
  }
}
