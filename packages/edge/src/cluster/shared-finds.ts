import type { OwnerFinding } from '../public/cross-node.js';

/**
 * How long the registry's answer about a name is shared with every later asker. Requests waiting for one
 * name each ask every 200 ms; sharing the answer in flight and for half that period makes the registry's
 * load one read pair per name per 100 ms, however many requests wait.
 */
export const FIND_SHARE_MS = 100;

/** One registry answer about a name, shared by everyone asking while it is in flight and fresh. */
interface SharedFinding {
  readonly finding: Promise<OwnerFinding>;
  /** Set once answered: the answer, and when (it is shared for FIND_SHARE_MS after). */
  result: OwnerFinding | undefined;
  settledAt: number;
}

/** Registry answers being asked or just answered, by name (entries live FIND_SHARE_MS once answered). */
export class SharedFinds {
  readonly #finds = new Map<string, SharedFinding>();

  /** The answer in flight or fresh for `name`, else `ask`'s, shared from now on. */
  get(name: string, ask: () => Promise<OwnerFinding>): Promise<OwnerFinding> {
    const shared = this.#finds.get(name);
    if (
      shared !== undefined &&
      (shared.result === undefined || Date.now() - shared.settledAt < FIND_SHARE_MS)
    )
      return shared.finding;
    const entry: SharedFinding = { finding: ask(), result: undefined, settledAt: 0 };
    this.#finds.set(name, entry);
    const forget = (): void => {
      if (this.#finds.get(name) === entry) this.#finds.delete(name);
    };
    entry.finding.then(
      (result) => {
        entry.result = result;
        entry.settledAt = Date.now();
        setTimeout(forget, FIND_SHARE_MS).unref();
      },
      // A failed read is not shared with later askers: the next one asks again.
      forget,
    );
    return entry.finding;
  }

  /** Forgets an answered finding about `name` (one still in flight stays shared). */
  dropAnswered(name: string): void {
    if (this.#finds.get(name)?.result !== undefined) this.#finds.delete(name);
  }

  /** Forgets every answer naming `nodeId` as the owner. */
  dropNode(nodeId: string): void {
    for (const [name, shared] of this.#finds)
      if (shared.result?.state === 'remote' && shared.result.entry.nodeId === nodeId)
        this.#finds.delete(name);
  }
}
