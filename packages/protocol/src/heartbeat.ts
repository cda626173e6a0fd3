/**
 * Liveness by silence: at every interval, a peer heard from since the last tick is alive and is pinged;
 * two silent intervals in a row mean it is gone. One unref'd timer per session.
 */
export class Heartbeat {
  readonly #timer: NodeJS.Timeout;
  /** True from the start: the frame that started the heartbeat (the peer's HELLO) was just heard. */
  #heard = true;
  #silentTicks = 0;

  constructor(intervalMs: number, ping: () => void, silent: () => void) {
    this.#timer = setInterval(() => {
      if (this.#heard) {
        this.#heard = false;
        this.#silentTicks = 0;
      } else if (++this.#silentTicks >= 2) {
        silent();
        return;
      }
      ping();
    }, intervalMs);
    this.#timer.unref();
  }

  /** Something arrived from the peer. */
  heard(): void {
    this.#heard = true;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * The heartbeat two sides agree on: the smaller of their non-zero intervals (PROTOCOL.md §7), or none
 * when both announced 0. `silent` hears a peer that sent nothing for two intervals.
 */
export function agreedHeartbeat(
  localMs: number,
  peerMs: number,
  ping: () => void,
  silent: (intervalMs: number) => void,
): Heartbeat | undefined {
  const interval = Math.min(localMs || Number.POSITIVE_INFINITY, peerMs || Number.POSITIVE_INFINITY);
  if (!Number.isFinite(interval)) return undefined;
  return new Heartbeat(interval, ping, () => silent(interval));
}
