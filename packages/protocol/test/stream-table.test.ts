import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { StreamTable } from '../src/session/stream-table.js';

interface Entry {
  readonly id: number;
  readonly tag: number;
}

type Op =
  | { kind: 'set'; id: number; tag: number }
  | { kind: 'delete'; id: number }
  | { kind: 'get'; id: number };

/** Ids of both parities (both sides' streams), from a small range so that they collide and wrap. */
const id = fc.integer({ min: 1, max: 300 });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), id, tag: fc.nat() }),
  fc.record({ kind: fc.constant('delete' as const), id }),
  fc.record({ kind: fc.constant('get' as const), id }),
);

describe('StreamTable', () => {
  it('answers as a Map keyed by id does, for any sequence of sets, deletes and gets', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 600 }), (ops) => {
        const table = new StreamTable<Entry>();
        const model = new Map<number, Entry>();
        for (const o of ops) {
          if (o.kind === 'set') {
            const entry = { id: o.id, tag: o.tag };
            table.set(entry);
            model.set(o.id, entry);
          } else if (o.kind === 'delete') {
            expect(table.delete(o.id)).toBe(model.delete(o.id));
          } else {
            expect(table.get(o.id)).toBe(model.get(o.id));
          }
          expect(table.size).toBe(model.size);
        }
        for (const [key, entry] of model) expect(table.get(key)).toBe(entry);
        expect(table.values()).toEqual([...model.values()].sort((a, b) => a.id - b.id));
      }),
      { numRuns: 300 },
    );
  });

  it('grows past its first capacity and clears', () => {
    const table = new StreamTable<Entry>();
    for (let i = 1; i <= 1001; i += 2) table.set({ id: i, tag: i });
    expect(table.size).toBe(501);
    expect(table.get(999)?.tag).toBe(999);
    expect(table.has(1000)).toBe(false);
    table.clear();
    expect(table.size).toBe(0);
    expect(table.get(999)).toBeUndefined();
  });

  it('streams opened and closed after the table reached the old generation are not promoted with it (issue #34)', () => {
    // A Map here promoted every stream that ever passed through it once its table was old: 7.2 MB for
    // these 20,000 (V8 links each table a rehash leaves behind to its successor, and a dead old table's
    // pointers are roots for a scavenge). That is the edge's "high mode" (bench/README.md).
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;
    const outsideNewSpace = (): number =>
      getHeapSpaceStatistics()
        .filter((space) => space.space_name !== 'new_space')
        .reduce((sum, space) => sum + space.space_used_size, 0);
    const table = new StreamTable<{ readonly id: number; readonly body: number[] }>();
    const open: { readonly id: number; readonly body: number[] }[] = [];
    let next = 1;
    const openOne = (): void => {
      const stream = { id: next, body: new Array<number>(40).fill(next) };
      next += 2;
      table.set(stream);
      open.push(stream);
    };
    for (let i = 0; i < 100; i++) openOne();
    gc();
    gc();
    const before = outsideNewSpace();
    for (let i = 0; i < 20_000; i++) {
      openOne();
      table.delete(open.shift()!.id);
    }
    for (let i = 0; i < 3; i++) gc({ type: 'minor' });
    // ~0.1 MB: the 100 streams still open and what the loop itself left; a Map: 7.2 MB.
    expect(outsideNewSpace() - before).toBeLessThan(2_000_000);
  });
});
