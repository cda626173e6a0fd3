import { describe, expect, it } from 'vitest';
import { ReplicaRoutes } from '../src/cluster/replica-routes.js';
import type { OwnerEntry } from '../src/public/cross-node.js';

// The choice among a replicated name's holder nodes (cluster/replica-routes.ts): HAProxy's leastconn over
// this node's own outstanding requests on each, ties round robin, this node one holder among the others.

function holder(nodeId: string, epoch = 1): OwnerEntry {
  return { nodeId, url: `http://${nodeId}.invalid`, epoch, replica: true };
}

function routes(now = { t: 0 }) {
  const refreshed: string[] = [];
  const table = new ReplicaRoutes({
    nodeId: 'me',
    ttlMs: 1_000,
    maxEntries: 10,
    refresh: (name) => refreshed.push(name),
    now: () => now.t,
  });
  return { table, refreshed, now };
}

const id = (pick: OwnerEntry | 'here' | undefined) => (typeof pick === 'object' ? pick.nodeId : pick);

describe('ReplicaRoutes', () => {
  it('an unknown name asks the registry in the background and is served here meanwhile', () => {
    const { table, refreshed } = routes();
    expect(table.pick('shop', true)).toBe('here');
    expect(table.pick('shop', false)).toBeUndefined();
    expect(refreshed).toEqual(['shop', 'shop']);
  });

  it('idle holders take turns (this node one of them); a busy one is passed over', () => {
    const { table } = routes();
    table.set('shop', [holder('a'), holder('me'), holder('b')]);
    const seen = new Set<string | undefined>();
    for (let i = 0; i < 6; i++) seen.add(id(table.pick('shop', true)));
    expect(seen).toEqual(new Set(['here', 'a', 'b']));
    const ends = [table.track('shop', 'a'), table.track('shop', 'me')];
    for (let i = 0; i < 4; i++) expect(id(table.pick('shop', true))).toBe('b');
    for (const end of ends) end();
    expect(table.outstanding('shop', 'a')).toBe(0);
  });

  it('an end counts once, however often it is called', () => {
    const { table } = routes();
    const end = table.track('shop', 'a');
    table.track('shop', 'a');
    end();
    end();
    expect(table.outstanding('shop', 'a')).toBe(1);
  });

  it('a holder the request already tried, or a node that did not answer, is skipped', () => {
    const { table, now } = routes();
    table.set('shop', [holder('a', 5), holder('b', 6)]);
    for (let i = 0; i < 4; i++) expect(id(table.pick('shop', false, new Set(['a#5'])))).toBe('b');
    table.down('b');
    for (let i = 0; i < 4; i++) expect(id(table.pick('shop', false))).toBe('a');
    now.t = 2_000;
    table.set('shop', [holder('a', 5), holder('b', 6)]);
    const seen = new Set<string | undefined>();
    for (let i = 0; i < 4; i++) seen.add(id(table.pick('shop', false)));
    expect(seen).toEqual(new Set(['a', 'b']));
  });

  it('a holder that said "not here" leaves the set until the next read; a stale set is read once per period', () => {
    const { table, refreshed, now } = routes();
    table.set('shop', [holder('a'), holder('b')]);
    table.drop('shop', 'a');
    for (let i = 0; i < 3; i++) expect(id(table.pick('shop', false))).toBe('b');
    now.t = 1_500;
    table.pick('shop', false);
    table.pick('shop', false);
    expect(refreshed).toEqual(['shop']);
  });
});
