import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConnection } from '../src/agents/agent-connection.js';
import type { TcpPort } from '../src/agents/tcp-port.js';
import { SharedTcpPorts } from '../src/cluster/tcp/shared-tcp-ports.js';
import { EdgeErrorCode } from '../src/errors.js';
import { InFlight } from '../src/exchange/in-flight.js';
import { freeRange } from './support/free-range.js';
import { loneCluster } from './support/lone-cluster.js';

// A cluster node's TCP ports (cluster/tcp/shared-tcp-ports.ts) on the memory registry, with another node's
// claims written into the registry directly: how ports in their grace count against an account across
// nodes (issue #29, defect 2). The same through real edges on a real redis-server:
// packages/cli/test/e2e-tcp-port-hoarding.test.ts.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const silent = pino({ level: 'silent' });
const LIMIT = 2;

async function node(
  size: number,
): Promise<{ ports: SharedTcpPorts; registry: SessionRegistry; first: number }> {
  const registry = createMemoryRegistry();
  const cluster = loneCluster(registry);
  const range = await freeRange(size);
  const ports = new SharedTcpPorts({
    range,
    host: '127.0.0.1',
    maxPortsPerOwner: LIMIT,
    reconnectGraceMs: 60_000,
    leaseTtlMs: 10_000,
    registry,
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

/** A port `owner` (anonymous, from `address`) holds on node-b, its agent gone: in its grace there. */
async function reservedElsewhere(registry: SessionRegistry, port: number, owner: string, address: string) {
  const name = `tcp:${port}`;
  const claimed = await registry.claim({
    name,
    owner,
    account: `addr:${address}`,
    nodeId: 'node-b',
    ttlMs: 10_000,
  });
  if (!claimed.ok) throw new Error('claim refused');
  await registry.markDisconnected(name, claimed.record.epoch, 60_000 + port);
}

async function claimed(
  ports: SharedTcpPorts,
  owner: string,
  requested?: number,
  address?: string,
): Promise<TcpPort> {
  const claim = await ports.claim(owner, requested, address);
  if (!claim.ok) throw new Error(claim.message);
  return claim.port;
}

/** The part of an agent connection the port table touches. */
function agent(): AgentConnection {
  return { close: () => {}, ready: true, session: { draining: false } } as unknown as AgentConnection;
}

describe('SharedTcpPorts: ports held in grace count against their account across nodes', () => {
  it("gives back the address's oldest reservation, held by another node, to make room", async () => {
    const { ports, registry, first } = await node(4);
    // Two anonymous agents of one address left ports reserved on node-b, the first one earlier.
    await reservedElsewhere(registry, first, 'key-1', '192.0.2.1');
    await reservedElsewhere(registry, first + 1, 'key-2', '192.0.2.1');
    const port = await claimed(ports, 'key-3', undefined, '192.0.2.1');
    expect(await registry.lookup(`tcp:${first}`)).toBeUndefined();
    expect(await registry.lookup(`tcp:${first + 1}`)).toMatchObject({ owner: 'key-2', connected: false });
    expect((await registry.listOwned('addr:192.0.2.1', 'tcp')).map((r) => r.name).sort()).toEqual(
      [`tcp:${first + 1}`, `tcp:${port.port}`].sort(),
    );
    // All in use now (the new one's session is coming up, the other is live on node-b): refused.
    const live = await registry.claim({
      name: `tcp:${first + 1}`,
      owner: 'key-2',
      account: 'addr:192.0.2.1',
      nodeId: 'node-b',
      ttlMs: 10_000,
    });
    expect(live.ok).toBe(true);
    expect(await ports.claim('key-4', undefined, '192.0.2.1')).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TOO_MANY_TCP_PORTS,
      message: expect.stringContaining('from this address'),
    });
    // Another address is not concerned.
    await claimed(ports, 'key-5', undefined, '192.0.2.2');
  });

  it("never takes another agent key's reservation, of the same address, that is asked for by number", async () => {
    const { ports, registry, first } = await node(4);
    await reservedElsewhere(registry, first, 'key-1', '192.0.2.1');
    await reservedElsewhere(registry, first + 1, 'key-2', '192.0.2.1');
    expect(await ports.claim('key-3', first, '192.0.2.1')).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TCP_PORT_UNAVAILABLE,
    });
    // Refused before anything was given back for it.
    expect(await registry.listOwned('addr:192.0.2.1', 'tcp')).toHaveLength(2);
    // Its own agent gets it back.
    expect((await claimed(ports, 'key-1', first, '192.0.2.1')).port).toBe(first);
  });

  it('offers a port it keeps in its grace once the registry has given it back', async () => {
    const { ports, registry, first } = await node(1);
    const port = await claimed(ports, 'token');
    const session = agent();
    ports.attach(port, session);
    ports.detach(port, session);
    const record = await registry.lookup(`tcp:${first}`);
    // Another node made room for this token: the registry has the port free, this node still keeps it.
    await registry.release(`tcp:${first}`, record?.epoch ?? 0);
    expect((await claimed(ports, 'other-token')).port).toBe(first);
    expect(await registry.lookup(`tcp:${first}`)).toMatchObject({ owner: 'other-token' });
  });
});
