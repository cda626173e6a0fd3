/**
 * The open streams of one session by id: the part of a Map a session uses (size, get, set, delete, values,
 * clear), as an open-addressed table that deletes by shifting its neighbours back.
 *
 * Why not a Map: a Map that streams churn through (one set and one delete per request) is rehashed by V8
 * every few hundred requests, and the table it leaves behind keeps the streams it held and a pointer to its
 * successor. Once one of those tables has been promoted to the old generation (a table that lived across
 * two scavenges), the dead table keeps its successor alive through every scavenge (old-to-new pointers are
 * roots there), and that one the next: every stream, with its request and response, is promoted until a full
 * collection, which comes every ~1.5 s under load (issue #34, the edge's "high mode"; bench/README.md).
 * Here a deleted slot is cleared, and the array is replaced only when it grows, without a link to the new one.
 */
export class StreamTable<T extends { readonly id: number }> {
  #slots: (T | undefined)[];
  #mask: number;
  #size = 0;

  constructor(capacity = MIN_CAPACITY) {
    const size = capacityFor(capacity);
    this.#slots = new Array<T | undefined>(size).fill(undefined);
    this.#mask = size - 1;
  }

  get size(): number {
    return this.#size;
  }

  get(id: number): T | undefined {
    const slots = this.#slots;
    const mask = this.#mask;
    for (let i = home(id, mask); ; i = (i + 1) & mask) {
      const entry = slots[i];
      if (entry === undefined || entry.id === id) return entry;
    }
  }

  has(id: number): boolean {
    return this.get(id) !== undefined;
  }

  /** Adds `stream` under its own id, or replaces the stream of that id. */
  set(stream: T): void {
    if ((this.#size + 1) * 2 > this.#slots.length) this.#grow();
    const slots = this.#slots;
    const mask = this.#mask;
    for (let i = home(stream.id, mask); ; i = (i + 1) & mask) {
      const entry = slots[i];
      if (entry === undefined) {
        slots[i] = stream;
        this.#size++;
        return;
      }
      if (entry.id === stream.id) {
        slots[i] = stream;
        return;
      }
    }
  }

  /** Removes the stream of `id`; false when there was none. */
  delete(id: number): boolean {
    const slots = this.#slots;
    const mask = this.#mask;
    let i = home(id, mask);
    for (; ; i = (i + 1) & mask) {
      const entry = slots[i];
      if (entry === undefined) return false;
      if (entry.id === id) break;
    }
    slots[i] = undefined;
    this.#size--;
    // Backward shift: an entry further along the run moves into the hole unless its home lies cyclically
    // after the hole (then it would not be found from its home any more), so no tombstone is ever left.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const entry = slots[j];
      if (entry === undefined) return true;
      const h = home(entry.id, mask);
      const stays = i <= j ? i < h && h <= j : i < h || h <= j;
      if (stays) continue;
      slots[i] = entry;
      slots[j] = undefined;
      i = j;
    }
  }

  /** The streams by id (a Map's order: each side opens its streams in id order); a copy, so the caller may close them while iterating. */
  values(): T[] {
    const out: T[] = [];
    for (const entry of this.#slots) if (entry !== undefined) out.push(entry);
    return out.sort(byId);
  }

  clear(): void {
    this.#slots.fill(undefined);
    this.#size = 0;
  }

  #grow(): void {
    const old = this.#slots;
    const size = old.length * 2;
    this.#slots = new Array<T | undefined>(size).fill(undefined);
    this.#mask = size - 1;
    this.#size = 0;
    for (const entry of old) if (entry !== undefined) this.set(entry);
    // The old array is garbage now; cleared, so that a copy of it already promoted keeps nothing alive.
    old.fill(undefined);
  }
}

const MIN_CAPACITY = 16;

const byId = (a: { readonly id: number }, b: { readonly id: number }): number => a.id - b.id;

function capacityFor(wanted: number): number {
  let size = MIN_CAPACITY;
  while (size < wanted) size *= 2;
  return size;
}

/**
 * Where an id's search starts. Stream ids of one side go up by 2, so the id without its parity bit spreads
 * the streams open at once over consecutive slots; the other side's ids (the other parity) interleave.
 */
function home(id: number, mask: number): number {
  return (id >>> 1) & mask;
}
