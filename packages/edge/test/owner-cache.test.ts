import { describe, expect, it } from 'vitest';
import { OwnerCache } from '../src/cluster/owner-cache.js';
import type { OwnerEntry } from '../src/public/cross-node.js';

function entry(nodeId: string, epoch: number): OwnerEntry {
  return { nodeId, url: `http://${nodeId}.test:8080`, epoch };
}

function clock(start = 1_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('OwnerCache', () => {
  it('holds at most maxEntries, the least recently stored going first', () => {
    const c = clock();
    const cache = new OwnerCache({ maxEntries: 3, ttlMs: 10_000, now: c.now });
    for (const name of ['a', 'b', 'c', 'd']) cache.set(name, entry('n1', 1));
    expect(cache.size).toBe(3);
    expect(cache.get('a')).toBeUndefined();
    // Storing b again makes it the most recent: c goes next.
    cache.set('b', entry('n2', 2));
    cache.set('e', entry('n1', 1));
    expect(cache.get('c')).toBeUndefined();
    expect(cache.get('b')).toEqual(entry('n2', 2));
    expect(cache.size).toBe(3);
  });

  it('a size of 0 remembers nothing', () => {
    const cache = new OwnerCache({ maxEntries: 0, ttlMs: 10_000 });
    cache.set('a', entry('n1', 1));
    expect(cache.size).toBe(0);
    expect(cache.get('a')).toBeUndefined();
  });

  it('forgets an entry at its TTL', () => {
    const c = clock();
    const cache = new OwnerCache({ maxEntries: 10, ttlMs: 2_000, now: c.now });
    cache.set('a', entry('n1', 1));
    c.advance(1_999);
    expect(cache.get('a')).toEqual(entry('n1', 1));
    c.advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('an older epoch never replaces a newer one while that one is fresh', () => {
    const c = clock();
    const cache = new OwnerCache({ maxEntries: 10, ttlMs: 2_000, now: c.now });
    cache.set('a', entry('n2', 7));
    cache.set('a', entry('n1', 6));
    expect(cache.get('a')).toEqual(entry('n2', 7));
    cache.set('a', entry('n3', 8));
    expect(cache.get('a')).toEqual(entry('n3', 8));
    // Once the newer entry has expired, any answer is better than none.
    c.advance(2_000);
    cache.set('a', entry('n1', 6));
    expect(cache.get('a')).toEqual(entry('n1', 6));
  });

  it('"not here" drops the entry it was about, never a newer one', () => {
    const cache = new OwnerCache({ maxEntries: 10, ttlMs: 10_000 });
    cache.set('a', entry('n1', 1));
    cache.drop('a', entry('n2', 1));
    expect(cache.get('a')).toEqual(entry('n1', 1));
    cache.drop('a', entry('n1', 1));
    expect(cache.get('a')).toBeUndefined();
    // The session came back to n1 under a newer claim: a late "not here" about the old one keeps it.
    cache.set('a', entry('n1', 5));
    cache.drop('a', entry('n1', 4));
    expect(cache.get('a')).toEqual(entry('n1', 5));
  });

  it('a node gone takes every name it held', () => {
    const cache = new OwnerCache({ maxEntries: 10, ttlMs: 10_000 });
    cache.set('a', entry('n1', 1));
    cache.set('b', entry('n2', 1));
    cache.set('c', entry('n1', 2));
    cache.dropNode('n1');
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, entry('n2', 1), undefined]);
  });
});
