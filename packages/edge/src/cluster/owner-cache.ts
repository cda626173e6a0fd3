import type { OwnerEntry } from '../public/cross-node.js';

export interface OwnerCacheOptions {
  /** Entries kept at most; the least recently stored goes first. */
  maxEntries: number;
  /** How long an entry is believed without asking the registry again. */
  ttlMs: number;
  now?: () => number;
}

/**
 * A bounded, short-lived cache of name → owner node, so a cross-node request does not cost two registry
 * round trips. It is corrected, not just aged: an entry is dropped when its node says "not here" or cannot
 * be reached, and an entry with an older epoch never replaces a newer one.
 */
export class OwnerCache {
  readonly #entries = new Map<string, { entry: OwnerEntry; until: number }>();
  readonly #max: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: OwnerCacheOptions) {
    this.#max = options.maxEntries;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(name: string): OwnerEntry | undefined {
    const held = this.#entries.get(name);
    if (held === undefined) return undefined;
    if (held.until <= this.#now()) {
      this.#entries.delete(name);
      return undefined;
    }
    return held.entry;
  }

  set(name: string, entry: OwnerEntry): void {
    const held = this.#entries.get(name);
    // A late answer about an older claim must not undo what a newer one taught.
    if (held !== undefined && held.entry.epoch > entry.epoch && held.until > this.#now()) return;
    this.#entries.delete(name);
    if (this.#max === 0) return;
    while (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
    this.#entries.set(name, { entry, until: this.#now() + this.#ttlMs });
  }

  /**
   * Drops the entry of `name` if it is the one `about` describes or an older one: a late "not here" about
   * an old claim must not drop what a newer claim taught, even when the session came back to that node.
   */
  drop(name: string, about?: Pick<OwnerEntry, 'nodeId' | 'epoch'>): void {
    const held = this.#entries.get(name);
    if (held === undefined) return;
    if (about === undefined) {
      this.#entries.delete(name);
      return;
    }
    if (
      held.entry.nodeId === about.nodeId ? held.entry.epoch <= about.epoch : held.entry.epoch < about.epoch
    ) {
      this.#entries.delete(name);
    }
  }

  /** Drops every entry naming `nodeId` (the node is gone). */
  dropNode(nodeId: string): void {
    for (const [name, held] of this.#entries) if (held.entry.nodeId === nodeId) this.#entries.delete(name);
  }
}
