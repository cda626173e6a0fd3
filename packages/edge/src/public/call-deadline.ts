import type { RawHeaders } from '@tunnel2/protocol';
import { formatGrpcTimeout, grpcTimeoutMs } from './grpc-timeout.js';

/**
 * A gRPC call's deadline (its `grpc-timeout`), counted from its arrival at this edge: the moment its head
 * was read (`resolvePublicRequest`), as Envoy counts a route timeout from the request's arrival. Whatever
 * the call then waits for before a stream to its agent opens (its agent during the startup grace or a
 * reconnect, the registry, another node, a replica's retry, a free stream slot) is counted in it.
 *
 * While the call waits, this object's one timer calls the arrival back at the deadline (`arm`), which
 * answers DEADLINE_EXCEEDED. Once an exchange carries the call (`hold`), the exchange's own timer bounds it
 * with the time left; a call handed back unanswered (sent to another replica or node) waits again under
 * the timer (`release`). Over a node link the ingress states the time left in the head's grpc-timeout
 * (`passOn`), so the serving node's agent and its backend see the deadline as it is.
 */
export class CallDeadline {
  /** The client's timeout as the exchange names it: whole ms, at least 1. */
  readonly givenMs: number;
  /** When the call's time is up, on the performance clock (ms). */
  readonly at: number;
  #onPassed: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #held = false;
  /** The grpc-timeout value last written into the call's head for its agent. */
  #written: string | undefined;

  constructor(timeoutMs: number, arrivedAt: number) {
    this.givenMs = Math.max(1, Math.ceil(timeoutMs));
    this.at = arrivedAt + timeoutMs;
  }

  /** Milliseconds left (0 or less once passed). */
  left(): number {
    return this.at - performance.now();
  }

  /** True while an exchange carries the call (its own timer bounds it). */
  get held(): boolean {
    return this.#held;
  }

  /** The call waits: `onPassed` is called at the deadline, unless an exchange holds the call by then. */
  arm(onPassed: () => void): void {
    this.#onPassed = onPassed;
    if (!this.#held) this.#schedule();
  }

  /**
   * An exchange takes the call: the wait's timer stops, and the time left is returned for the exchange's
   * own timer (whole ms, at least 1), or 0 when less than a millisecond is left (the caller answers it).
   */
  hold(): number {
    this.#held = true;
    this.#clear();
    const left = this.left();
    return left < 1 ? 0 : Math.ceil(left);
  }

  /** The exchange gave the call back unanswered (it goes elsewhere): it waits under the timer again. */
  release(): void {
    this.#held = false;
    this.#schedule();
  }

  /** The call was answered or its client left: nothing more to time. */
  readonly cancel = (): void => {
    this.#onPassed = undefined;
    this.#clear();
  };

  /**
   * Writes the time left into `headers`' grpc-timeout field (the head for the agent or the next node), as a
   * client library does when a deadline propagates: the backend sees the call's true deadline.
   */
  passOn(headers: RawHeaders): void {
    const value = formatGrpcTimeout(this.left());
    this.#written = value;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      if (name.length === 12 && name.toLowerCase() === 'grpc-timeout') headers[i + 1] = value;
    }
  }

  /** True when the head written by `passOn` states more time than is left now (a wait since). */
  get stale(): boolean {
    return this.#written !== undefined && formatGrpcTimeout(this.left()) !== this.#written;
  }

  #schedule(): void {
    this.#clear();
    if (this.#onPassed === undefined) return;
    this.#timer = setTimeout(this.#fire, Math.max(0, this.left()));
  }

  readonly #fire = (): void => {
    this.#timer = undefined;
    // A timer counts from the event loop's cached time, which can be earlier than now: never answer early.
    const left = this.left();
    if (left > 0) {
      this.#timer = setTimeout(this.#fire, Math.ceil(left));
      return;
    }
    const onPassed = this.#onPassed;
    this.#onPassed = undefined;
    if (!this.#held) onPassed?.();
  };

  #clear(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** The deadline of a gRPC call arriving now, from its grpc-timeout; undefined without a valid one. */
export function callDeadline(value: string | string[] | undefined): CallDeadline | undefined {
  const timeoutMs = grpcTimeoutMs(value);
  return timeoutMs === undefined ? undefined : new CallDeadline(timeoutMs, performance.now());
}

/**
 * Takes `elapsedMs` off the grpc-timeout field in `headers` (a head another node wrote, stating the time
 * left then), for a call that waited that long here since: false when it has no valid field.
 */
export function restateGrpcTimeout(headers: RawHeaders, elapsedMs: number): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name.length !== 12 || name.toLowerCase() !== 'grpc-timeout') continue;
    const timeoutMs = grpcTimeoutMs(headers[i + 1]);
    if (timeoutMs === undefined) return false;
    headers[i + 1] = formatGrpcTimeout(timeoutMs - elapsedMs);
    return true;
  }
  return false;
}
