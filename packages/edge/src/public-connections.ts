import type { Socket } from 'node:net';

/**
 * The public port's open HTTP connections (an upgraded one leaves: it is a WebSocket, counted in flight),
 * so a drain can wait for them to go by themselves: each brings its next request, answered with
 * `Connection: close`, or reaches its keep-alive timeout, which Node announces in `Keep-Alive: timeout=`
 * so a client does not send on it any more. Closing an idle keep-alive connection at any other moment
 * races with a client that has just sent a request on it: that client sees a reset.
 */
export class PublicConnections {
  readonly #open = new Set<Socket>();
  #waiters: (() => void)[] = [];

  get size(): number {
    return this.#open.size;
  }

  add(socket: Socket): void {
    this.#open.add(socket);
    socket.once('close', () => this.remove(socket));
  }

  /** The connection left HTTP (an upgrade) or closed. */
  remove(socket: Socket): void {
    if (!this.#open.delete(socket) || this.#open.size > 0) return;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Resolves when no HTTP connection is open, or after `timeoutMs`; true if none is. */
  closed(timeoutMs: number): Promise<boolean> {
    if (this.#open.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      this.#waiters.push(wake);
    });
  }
}
