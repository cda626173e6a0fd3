import { EventEmitter } from 'node:events';
import type { CaptureBudget } from './body-capture.js';
import { InspectorError, InspectorErrorCode } from './errors.js';
import type { StoredEntry } from './stored-entry.js';

export interface EntryStoreOptions {
  /** All entries together stay within this many bytes (default 64 MiB). */
  budgetBytes?: number;
  /** And this many entries (default 1,000). */
  maxEntries?: number;
}

export const DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_ENTRIES = 1_000;

export interface EntryStoreEvents {
  entry: [StoredEntry];
  clear: [];
  status: [{ paused: boolean }];
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InspectorError(InspectorErrorCode.INVALID_OPTION, `${name} must be a positive integer`);
  }
  return value;
}

/**
 * The captured entries, oldest first (a Map keeps insertion order), within a byte budget and a count cap:
 * adding one evicts the oldest until both hold. The budget also covers the bodies of exchanges still being
 * captured (reserved chunk by chunk: see BodyCapture), so up to 1,000 concurrent exchanges cannot hold more
 * than it either. Entries are numbered when stored, so ids follow the list's order.
 */
export class EntryStore extends EventEmitter<EntryStoreEvents> implements CaptureBudget {
  readonly budgetBytes: number;
  readonly maxEntries: number;
  readonly #entries = new Map<string, StoredEntry>();
  /** What the stored entries cost. */
  #bytes = 0;
  /** Bytes held outside them: bodies being captured, decoded bodies cached for the stored ones. */
  #reserved = 0;
  #nextId = 1;
  #paused = false;

  constructor(options: EntryStoreOptions = {}) {
    super();
    this.budgetBytes = positiveInteger('budget', options.budgetBytes, DEFAULT_BUDGET_BYTES);
    this.maxEntries = positiveInteger('max entries', options.maxEntries, DEFAULT_MAX_ENTRIES);
  }

  get paused(): boolean {
    return this.#paused;
  }

  get count(): number {
    return this.#entries.size;
  }

  /** Bytes held: the stored entries and what is reserved beside them. */
  get bytes(): number {
    return this.#bytes + this.#reserved;
  }

  setPaused(paused: boolean): void {
    if (this.#paused === paused) return;
    this.#paused = paused;
    this.emit('status', { paused });
  }

  reserve(bytes: number): boolean {
    // Entries are evicted only when that makes room: what is being captured is never evicted for.
    if (this.#reserved + bytes > this.budgetBytes) return false;
    while (this.#bytes + this.#reserved + bytes > this.budgetBytes && this.#evictOldest()) {}
    this.#reserved += bytes;
    return true;
  }

  reserveSpare(bytes: number): boolean {
    if (this.#bytes + this.#reserved + bytes > this.budgetBytes) return false;
    this.#reserved += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#reserved -= bytes;
  }

  /**
   * Stores a finished entry, numbering it now (`build` gets its id). One larger than the whole budget is
   * not kept (its bodies were reserved chunk by chunk, so only its heads can make it so).
   */
  add(build: (id: string) => StoredEntry): StoredEntry {
    const entry = build(String(this.#nextId++));
    if (entry.cost > this.budgetBytes) return entry;
    this.#entries.set(entry.id, entry);
    this.#bytes += entry.cost;
    while (
      (this.#bytes + this.#reserved > this.budgetBytes || this.#entries.size > this.maxEntries) &&
      this.#entries.size > 1 &&
      this.#evictOldest()
    ) {}
    this.emit('entry', entry);
    return entry;
  }

  #evictOldest(): boolean {
    for (const [id, oldest] of this.#entries) {
      this.#entries.delete(id);
      this.#drop(oldest);
      return true;
    }
    return false;
  }

  #drop(entry: StoredEntry): void {
    this.#bytes -= entry.cost;
    entry.request.retire();
    entry.response.retire();
  }

  get(id: string): StoredEntry | undefined {
    return this.#entries.get(id);
  }

  /** Newest first. */
  *newestFirst(): Generator<StoredEntry> {
    const all = [...this.#entries.values()];
    for (let i = all.length - 1; i >= 0; i--) yield all[i]!;
  }

  all(): StoredEntry[] {
    return [...this.#entries.values()];
  }

  clear(): void {
    for (const entry of this.#entries.values()) this.#drop(entry);
    this.#entries.clear();
    this.emit('clear');
  }
}
