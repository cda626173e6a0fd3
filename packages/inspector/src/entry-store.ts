import { EventEmitter } from 'node:events';
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
 * adding one evicts the oldest until both hold. An entry larger than the whole budget is not kept.
 */
export class EntryStore extends EventEmitter<EntryStoreEvents> {
  readonly budgetBytes: number;
  readonly maxEntries: number;
  readonly #entries = new Map<string, StoredEntry>();
  #bytes = 0;
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

  get bytes(): number {
    return this.#bytes;
  }

  setPaused(paused: boolean): void {
    if (this.#paused === paused) return;
    this.#paused = paused;
    this.emit('status', { paused });
  }

  /** Numbers an entry at its start, so ids follow arrival order. */
  nextId(): string {
    return String(this.#nextId++);
  }

  add(entry: StoredEntry): void {
    if (entry.cost > this.budgetBytes) return;
    this.#entries.set(entry.id, entry);
    this.#bytes += entry.cost;
    for (const [id, oldest] of this.#entries) {
      if (this.#bytes <= this.budgetBytes && this.#entries.size <= this.maxEntries) break;
      this.#entries.delete(id);
      this.#bytes -= oldest.cost;
    }
    this.emit('entry', entry);
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
    this.#entries.clear();
    this.#bytes = 0;
    this.emit('clear');
  }
}
