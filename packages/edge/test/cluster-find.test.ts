import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { afterEach, describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster/cluster.js';
import { loneCluster, signedAnnouncement } from './support/lone-cluster.js';

/** The memory registry, counting the reads a cluster makes to find a name's owner. */
function countingRegistry() {
  const inner = createMemoryRegistry();
  const reads = { lookup: 0, lookupNode: 0 };
  const registry: SessionRegistry = {
    ...inner,
    lookup: (name) => {
      reads.lookup++;
      return inner.lookup(name);
    },
    lookupNode: (nodeId) => {
      reads.lookupNode++;
      return inner.lookupNode(nodeId);
    },
  };
  return { inner, registry, reads };
}

const clusters: Cluster[] = [];

function cluster(registry: SessionRegistry, unsignedNodeRecords = false): Cluster {
  const created = loneCluster(registry, unsignedNodeRecords);
  clusters.push(created);
  return created;
}

afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

describe('Cluster.find', () => {
  it('shares one registry read among the requests waiting for the same name', async () => {
    const { inner, registry, reads } = countingRegistry();
    await inner.announceNode(signedAnnouncement('node-b', 'http://127.0.0.1:1', 10_000));
    await inner.claim({ name: 'app', owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
    const node = cluster(registry);
    // 256 requests waiting for one name all ask at once.
    const findings = await Promise.all(Array.from({ length: 256 }, () => node.find('app')));
    for (const finding of findings) expect(finding).toEqual(findings[0]);
    expect(findings[0]?.state).toBe('remote');
    expect(reads).toEqual({ lookup: 1, lookupNode: 1 });
    // Another name is a read of its own.
    expect((await node.find('other')).state).toBe('none');
    expect(reads.lookup).toBe(2);
  });

  it('asks the registry again once the owner said the name is not there', async () => {
    const { inner, registry, reads } = countingRegistry();
    await inner.announceNode(signedAnnouncement('node-b', 'http://127.0.0.1:1', 10_000));
    await inner.claim({ name: 'app', owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
    const node = cluster(registry);
    const first = await node.find('app');
    if (first.state !== 'remote') throw new Error(`expected remote, got ${first.state}`);
    node.notHere('app', first.entry);
    await node.find('app');
    expect(reads.lookup).toBe(2);
  });

  it('does not share a failed read', async () => {
    const { inner, registry, reads } = countingRegistry();
    const node = cluster(registry);
    await inner.close();
    await expect(node.find('app')).rejects.toThrow();
    await expect(node.find('app')).rejects.toThrow();
    expect(reads.lookup).toBe(2);
  });

  it('takes a node record only as its node signed it: unsigned or moved, its sessions are pending', async () => {
    const { inner, registry } = countingRegistry();
    const node = cluster(registry);
    const genuine = signedAnnouncement('node-b', 'http://127.0.0.1:1', 10_000);
    const forgeries = [
      { ...genuine, signature: undefined },
      { ...genuine, url: 'http://127.0.0.1:2' },
      { ...signedAnnouncement('node-c', 'http://127.0.0.1:1', 10_000), nodeId: 'node-b' },
    ];
    for (const [i, forged] of forgeries.entries()) {
      // A name of its own each time: a fresh registry read, not the answer shared for the last one.
      await inner.claim({ name: `app${i}`, owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
      await inner.announceNode(forged);
      expect((await node.find(`app${i}`)).state).toBe('pending');
      expect(node.counters.ignoredRecords).toBe(i + 1);
    }
    await inner.claim({ name: 'app', owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
    await inner.announceNode(genuine);
    expect(await node.find('app')).toMatchObject({ state: 'remote', entry: { url: 'http://127.0.0.1:1' } });
  });

  it('takes an unsigned record only while unsignedNodeRecords is on (a rolling upgrade), never a bad signature', async () => {
    const { inner, registry } = countingRegistry();
    const node = cluster(registry, true);
    await inner.claim({ name: 'app', owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
    await inner.announceNode({ nodeId: 'node-b', url: 'http://127.0.0.1:1', ttlMs: 10_000 });
    expect(await node.find('app')).toMatchObject({ state: 'remote', entry: { url: 'http://127.0.0.1:1' } });
    const moved = {
      ...signedAnnouncement('node-b', 'http://127.0.0.1:1', 10_000),
      url: 'http://127.0.0.1:2',
    };
    await inner.claim({ name: 'app2', owner: 'o', nodeId: 'node-b', ttlMs: 10_000 });
    await inner.announceNode(moved);
    expect((await node.find('app2')).state).toBe('pending');
    expect(node.counters.ignoredRecords).toBe(1);
  });
});
