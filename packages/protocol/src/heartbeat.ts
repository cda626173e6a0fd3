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
