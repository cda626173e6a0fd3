import { createMemoryRegistry, type ReplicaSetRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { TcpPort } from '../src/agents/tcp-port.js';
import type { TunnelEntry } from '../src/agents/tunnel-entry.js';
import { SharedTcpPorts } from '../src/cluster/tcp/shared-tcp-ports.js';
import { EdgeErrorCode } from '../src/errors.js';
import { InFlight } from '../src/exchange/in-flight.js';
import { freeRange } from './support/free-range.js';
import { loneCluster } from './support/lone-cluster.js';

// A cluster node's ports of TCP replicas (cluster/tcp/replica-ports.ts through shared-tcp-ports.ts) on the
// memory registry, another node's place written into the registry directly: the port's key is a replica
// set; this node's place is kept for the grace only when it is the set's last holder and its agent did not
// say it was leaving. Connections through two real nodes: packages/cli/test/e2e-cluster-tcp-replicas.test.ts.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const silent = pino({ level: 'silent' });

type Registry = SessionRegistry & ReplicaSetRegistry;

async function node(
  size: number,
  leaseTtlMs = 10_000,
): Promise<{ ports: SharedTcpPorts; registry: Registry; first: number }> {
  const registry = createMemoryRegistry() as Registry;
  const cluster = loneCluster(registry);
  const range = await freeRange(size);
  const ports = new SharedTcpPorts({
    range,
    host: '127.0.0.1',
    maxPortsPerOwner: 2,
    reconnectGraceMs: 60_000,
    leaseTtlMs,
    registry,
    replicaSets: registry,
    cluster,
    inFlight: new InFlight(),
    reconnectWaitMs: 0,
    maxHeldPerPort: 1,
    logger: silent,
  });
  await ports.start();
  cleanups.push(async () => {
    ports.close();
    await cluster.close();
    await registry.close();
  });
  return { ports, registry, first: range.first };
}

async function replicaClaim(ports: SharedTcpPorts, owner: string, port: number): Promise<TcpPort> {
  const claim = await ports.claim(owner, port, undefined, true);
  if (!claim.ok) throw new Error(claim.message);
  return claim.port;
}

/** The part of a replica's session the port table touches. */
function replica(owner: string, run: string, leaving = false, asReplica = true): TunnelEntry {
  const closed: string[] = [];
  return {
    closed,
    owner,
    replica: asReplica,
    leaving,
    ready: true,
    session: { draining: false },
    connection: { run, tellReplicas: () => {} },
    close: (code: string) => closed.push(code),
  } as unknown as TunnelEntry;
}

/** The holders of the port's replica set (node ids), settled: a place's release is not awaited by detach. */
async function holders(registry: Registry, port: number, expected: string[]): Promise<string[]> {
  for (let i = 0; i < 100; i++) {
    const set = await registry.lookupReplicas(`tcp:${port}`);
    const ids = set?.holders.map((holder) => holder.nodeId) ?? [];
    if (ids.join() === expected.join()) return ids;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return (await registry.lookupReplicas(`tcp:${port}`))?.holders.map((holder) => holder.nodeId) ?? [];
}

describe('SharedTcpPorts: a port of TCP replicas is a replica set of holder nodes', () => {
  it('two replicas of one owner here share one place; another owner is refused, as replica or not', async () => {
    const { ports, registry, first } = await node(2);
    const a = await replicaClaim(ports, 'owner-1', first);
    ports.attach(a, replica('owner-1', 'run-a'));
    const b = await replicaClaim(ports, 'owner-1', first);
    expect(b).toBe(a);
    ports.attach(b, replica('owner-1', 'run-b'));
    expect(a.entries).toHaveLength(2);
    expect(await holders(registry, first, ['node-a'])).toEqual(['node-a']);
    for (const asReplica of [true, false])
      expect(await ports.claim('owner-2', first, undefined, asReplica)).toMatchObject({
        ok: false,
        code: EdgeErrorCode.TCP_PORT_UNAVAILABLE,
      });
  });

  it("the last replica anywhere drops without a GOAWAY: this node's place is kept for the grace; a graceful one frees it", async () => {
    const { ports, registry, first } = await node(2);
    const dropped = replica('owner-1', 'run-a');
    const port = await replicaClaim(ports, 'owner-1', first);
    ports.attach(port, dropped);
    ports.detach(port, dropped);
    expect(await holders(registry, first, ['node-a'])).toEqual(['node-a']);
    expect(await ports.claim('owner-2', first, undefined, true)).toMatchObject({ ok: false });

    const leaving = replica('owner-1', 'run-b', true);
    const again = await replicaClaim(ports, 'owner-1', first);
    ports.attach(again, leaving);
    ports.detach(again, leaving);
    expect(await holders(registry, first, [])).toEqual([]);
    expect((await ports.claim('owner-2', first, undefined, true)).ok).toBe(true);
  });

  it("beside another node's live place, the last replica here gives this node's place back at once", async () => {
    const { ports, registry, first } = await node(2);
    const elsewhere = await registry.claimReplica({
      name: `tcp:${first}`,
      owner: 'owner-1',
      account: 'owner-1',
      nodeId: 'node-b',
      ttlMs: 10_000,
    });
    expect(elsewhere.ok).toBe(true);
    const dropped = replica('owner-1', 'run-a');
    const port = await replicaClaim(ports, 'owner-1', first);
    ports.attach(port, dropped);
    expect(await holders(registry, first, ['node-a', 'node-b'])).toEqual(['node-a', 'node-b']);
    ports.detach(port, dropped);
    expect(await holders(registry, first, ['node-b'])).toEqual(['node-b']);
  });

  it("a claim of another owner's replica port is refused before the account gives back a port in its grace", async () => {
    const { ports, registry, first } = await node(3);
    const set = await replicaClaim(ports, 'owner-1', first);
    ports.attach(set, replica('owner-1', 'run-a'));
    // owner-2 at its limit of 2: one port served, one in its reconnect grace (a dropped agent).
    for (const number of [first + 1, first + 2]) {
      const claim = await ports.claim('owner-2', number);
      if (!claim.ok) throw new Error(claim.message);
      const agent = replica('owner-2', `run-${number}`, false, false);
      ports.attach(claim.port, agent);
      if (number === first + 2) ports.detach(claim.port, agent);
    }
    expect(await ports.claim('owner-2', first)).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TCP_PORT_UNAVAILABLE,
    });
    // Its reservation was not given back for a port it could never get.
    expect(await registry.lookup(`tcp:${first + 2}`)).toMatchObject({ owner: 'owner-2' });
  });

  it("an account's replica ports count against its limit for a port of its own", async () => {
    const { ports, first } = await node(3);
    for (const number of [first, first + 1]) {
      const port = await replicaClaim(ports, 'owner-1', number);
      ports.attach(port, replica('owner-1', `run-${number}`));
    }
    // At its limit of 2: neither a third replica port nor an exclusive one.
    expect(await ports.claim('owner-1', first + 2, undefined, true)).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TOO_MANY_TCP_PORTS,
    });
    for (const requested of [first + 2, undefined])
      expect(await ports.claim('owner-1', requested)).toMatchObject({
        ok: false,
        code: EdgeErrorCode.TOO_MANY_TCP_PORTS,
      });
  });

  it("a place that expired while the registry was away is not re-taken over the owner's newer exclusive claim", async () => {
    const { ports, registry, first } = await node(2, 750);
    const port = await replicaClaim(ports, 'owner-1', first);
    const agent = replica('owner-1', 'run-a');
    ports.attach(port, agent);
    // The place expired meanwhile, and the owner's agent (not a replica) came back on node-b.
    const [mine] = (await registry.lookupReplicas(`tcp:${first}`))?.holders ?? [];
    await registry.releaseReplica(`tcp:${first}`, 'node-a', mine?.epoch ?? 0);
    const newer = await registry.claim({
      name: `tcp:${first}`,
      owner: 'owner-1',
      nodeId: 'node-b',
      ttlMs: 10_000,
    });
    expect(newer.ok).toBe(true);
    // A lease round (every leaseTtlMs / 3, at least 250 ms) finds the place gone.
    for (let i = 0; i < 100 && (agent as unknown as { closed: string[] }).closed.length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await registry.lookup(`tcp:${first}`)).toMatchObject({ nodeId: 'node-b' });
    expect(await holders(registry, first, [])).toEqual([]);
    expect((agent as unknown as { closed: string[] }).closed).toHaveLength(1);
  });
});
