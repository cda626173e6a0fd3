import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { normalizeAddress } from '../public/client-address.js';
import { RateLimitedWarning } from './rate-limited-warning.js';

/** Why the public port closed a connection at accept: the open-file cap, or one address's cap. */
export type DropReason = 'open_files' | 'per_address';

export interface PublicConnectionsOptions {
  /** Connections one peer address may hold open at once (`maxConnectionsPerAddress`); 0: no cap. */
  maxPerAddress: number;
  /** Peers the cap does not apply to: trusted proxies, which carry many clients each. */
  exempt: (address: string) => boolean;
  logger: Logger;
}

/**
 * The public port's connections, as the edge accepts them:
 *  - per peer address (the socket's, never X-Forwarded-For), so one address cannot hold every descriptor
 *    with idle connections; beyond `maxPerAddress` a new one is closed at accept, counted and logged;
 *  - drops at the open-file cap (Node's 'drop', see open-files.ts), counted and logged the same way;
 *  - the open HTTP connections (an upgraded one leaves: it is a WebSocket, counted in flight), so a drain
 *    can wait for them to go by themselves: each brings its next request, answered with
 *    `Connection: close`, or reaches its keep-alive timeout, which Node announces in `Keep-Alive:
 *    timeout=` so a client does not send on it any more. Closing an idle keep-alive connection at any
 *    other moment races with a client that has just sent a request on it: that client sees a reset.
 */
export class PublicConnections {
  readonly #options: PublicConnectionsOptions;
  readonly #http = new Set<Socket>();
  readonly #byAddress = new Map<string, number>();
  #waiters: (() => void)[] = [];
  /** Connections closed at accept, by reason, since the edge started. */
  readonly dropped: Record<DropReason, number> = { open_files: 0, per_address: 0 };
  readonly #warnings: Record<DropReason, RateLimitedWarning>;

  constructor(options: PublicConnectionsOptions) {
    this.#options = options;
    this.#warnings = {
      open_files: new RateLimitedWarning(
        options.logger,
        'public connections dropped: the open-file limit is near (raise ulimit -n)',
        { reason: 'open_files' },
      ),
      per_address: new RateLimitedWarning(
        options.logger,
        'public connections refused: one address holds maxConnectionsPerAddress',
        { reason: 'per_address', limit: options.maxPerAddress },
      ),
    };
  }

  /** Open HTTP connections (not upgraded). */
  get size(): number {
    return this.#http.size;
  }

  /**
   * A connection accepted, before anything is read from it (a TLS handshake included): false when its
   * address is over its cap (the caller closes it). It counts against its address until it closes.
   */
  admit(socket: Socket): boolean {
    const cap = this.#options.maxPerAddress;
    if (cap === 0) return true;
    const address = normalizeAddress(socket.remoteAddress ?? '');
    if (this.#options.exempt(address)) return true;
    const held = this.#byAddress.get(address) ?? 0;
    if (held >= cap) {
      this.#drop('per_address');
      return false;
    }
    this.#byAddress.set(address, held + 1);
    socket.once('close', () => {
      const left = (this.#byAddress.get(address) ?? 1) - 1;
      if (left === 0) this.#byAddress.delete(address);
      else this.#byAddress.set(address, left);
    });
    return true;
  }

  /** A connection the HTTP/1.1 server serves (the TLS socket over an admitted one, on a TLS port). */
  track(socket: Socket): void {
    this.#http.add(socket);
    socket.once('close', () => this.#leaveHttp(socket));
  }

  /** Node dropped a connection at `maxConnections` (the open-file cap). */
  droppedAtOpenFiles(): void {
    this.#drop('open_files');
  }

  /** The connection left HTTP (a WebSocket now); it still counts against its address until it closes. */
  upgraded(socket: Socket): void {
    this.#leaveHttp(socket);
  }

  /** Resolves when no HTTP connection is open, or after `timeoutMs`; true if none is. */
  closed(timeoutMs: number): Promise<boolean> {
    if (this.#http.size === 0) return Promise.resolve(true);
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

  /** Logs the drops still counted. */
  close(): void {
    this.#warnings.open_files.close();
    this.#warnings.per_address.close();
  }

  #leaveHttp(socket: Socket): void {
    if (!this.#http.delete(socket) || this.#http.size > 0) return;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  #drop(reason: DropReason): void {
    this.dropped[reason]++;
    this.#warnings[reason].note();
  }
}
