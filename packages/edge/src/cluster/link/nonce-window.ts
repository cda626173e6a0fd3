/** What admitting a link's nonce came to. */
export type NonceAdmission = 'fresh' | 'replayed' | 'full';

/** Nonces remembered at most: far beyond the links a cluster opens in a signature's window. */
export const DEFAULT_MAX_NONCES = 4096;

/**
 * The nonces of the link upgrades this node accepted, each until its signature stops verifying anyway
 * (its timestamp leaves the skew window): a captured upgrade replayed inside the window is refused. The
 * window bounds how many there can be; the cap bounds memory even against a peer that holds the secret
 * and opens links as fast as it can: when full, a new link is refused (the peer retries later) rather
 * than the set growing or an entry being dropped early, which would let its upgrade be replayed.
 */
export class NonceWindow {
  readonly #maxEntries: number;
  readonly #now: () => number;
  /** Nonce → until when it is remembered. Insertion order is roughly expiry order (see #sweep). */
  readonly #until = new Map<string, number>();

  constructor(maxEntries = DEFAULT_MAX_NONCES, now: () => number = Date.now) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
    this.#maxEntries = maxEntries;
    this.#now = now;
  }

  get size(): number {
    return this.#until.size;
  }

  /** Remembers `nonce` until `expiresAt` unless it is already remembered or the set is full. */
  admit(nonce: string, expiresAt: number): NonceAdmission {
    const now = this.#now();
    const seen = this.#until.get(nonce);
    if (seen !== undefined && seen >= now) return 'replayed';
    this.#sweep(now, this.#until.size >= this.#maxEntries);
    if (this.#until.size >= this.#maxEntries) return 'full';
    this.#until.set(nonce, expiresAt);
    return 'fresh';
  }

  /**
   * Drops expired nonces. Entries come in about the order they expire (timestamps differ by the peers'
   * skew), so the oldest are dropped from the front until a live one; `all` looks at every entry (only
   * when the set is full: O(n) at most once per refused or admitted link at the cap).
   */
  #sweep(now: number, all: boolean): void {
    for (const [nonce, until] of this.#until) {
      if (until < now) this.#until.delete(nonce);
      else if (!all) return;
    }
  }
}
