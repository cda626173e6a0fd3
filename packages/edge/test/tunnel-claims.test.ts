import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConnection } from '../src/agents/agent-connection.js';
import { ExtraTunnel } from '../src/agents/extra-tunnel.js';
import { SessionTable } from '../src/agents/session-table.js';
import { createTunnelClaims } from '../src/agents/tunnel-claims.js';
import { EdgeErrorCode } from '../src/errors.js';
import { TcpTunnels } from '../src/tcp/tcp-tunnels.js';
import { freeRange } from './support/free-range.js';

const tables: SessionTable[] = [];
afterEach(() => {
  for (const table of tables.splice(0)) table.close();
});

/** The memory registry, except that releasing `failing` rejects (as Redis down does). */
function registryFailingFor(failing: string): SessionRegistry {
  const inner = createMemoryRegistry();
  return {
    ...inner,
    release: (name, epoch) =>
      name === failing ? Promise.reject(new Error('connect ECONNREFUSED')) : inner.release(name, epoch),
  };
}

describe('releasing the tunnels a session listed', () => {
  it('a registry that rejects one release: a warning, no rejection, the other entries released', async () => {
    const registry = registryFailingFor('b');
    const warnings: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => void warnings.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const sessions = new SessionTable({
      registry,
      nodeId: 'node-a',
      leaseTtlMs: 60_000,
      reconnectGraceMs: 1_000,
      maxArrivalWaiters: 8,
      logger,
    });
    tables.push(sessions);
    const connection = { owner: 'owner-1' } as unknown as AgentConnection;
    const entries = [];
    for (const [tag, name] of ['a', 'b', 'c'].entries()) {
      const admitted = await sessions.admit(name, 'owner-1');
      if (!admitted.ok) throw new Error('claim refused');
      entries.push(
        new ExtraTunnel({
          name,
          epoch: admitted.epoch,
          port: undefined,
          protection: undefined,
          tag,
          connection,
        }),
      );
    }
    const claims = createTunnelClaims({
      sessions,
      tcp: undefined,
      logger,
      maxNamesPerOwner: 10,
      reconnectGraceMs: 60_000,
      namesHeld: () => 0,
      anonymousAddress: () => undefined,
      urlsFor: (name) => ({ url: name, urls: [name] }),
      tcpUrlFor: (port) => String(port),
    });
    await expect(claims.release(entries, false)).resolves.toBeUndefined();
    expect(await registry.lookup('a')).toBeUndefined();
    expect(await registry.lookup('c')).toBeUndefined();
    expect(await registry.lookup('b')).toBeDefined();
    expect(warnings).toMatchObject([{ session: 'b', msg: 'registry release failed' }]);
  });
});

describe('tunnels a session lists', () => {
  it("are recorded under the session's account (an anonymous agent's address), for the node links' shares", async () => {
    const registry = createMemoryRegistry();
    const logger = pino({ level: 'silent' });
    const sessions = new SessionTable({
      registry,
      nodeId: 'node-a',
      leaseTtlMs: 60_000,
      reconnectGraceMs: 1_000,
      maxArrivalWaiters: 8,
      logger,
    });
    tables.push(sessions);
    const claims = createTunnelClaims({
      sessions,
      tcp: undefined,
      logger,
      maxNamesPerOwner: 10,
      reconnectGraceMs: 60_000,
      namesHeld: () => 0,
      anonymousAddress: () => '192.0.2.1',
      urlsFor: (name) => ({ url: name, urls: [name] }),
      tcpUrlFor: (port) => String(port),
    });
    const connection = {
      owner: 'key-a',
      account: 'addr:192.0.2.1',
      name: 'main',
      session: { closed: false },
    } as unknown as AgentConnection;
    const claimed = await claims.claim(connection, [{ name: 'extra-one' }]);
    expect(claimed.entries.map((entry) => entry.account)).toEqual(['addr:192.0.2.1']);
    expect(await registry.lookup('extra-one')).toMatchObject({ owner: 'key-a', account: 'addr:192.0.2.1' });
  });
});

describe('TCP tunnels a session lists', () => {
  it("count against an anonymous agent's address, not its agent key (issue #29)", async () => {
    const logger = pino({ level: 'silent' });
    const sessions = new SessionTable({
      registry: createMemoryRegistry(),
      nodeId: 'node-a',
      leaseTtlMs: 60_000,
      reconnectGraceMs: 1_000,
      maxArrivalWaiters: 8,
      logger,
    });
    tables.push(sessions);
    const tcp = new TcpTunnels({
      range: await freeRange(4),
      host: '127.0.0.1',
      maxPortsPerOwner: 1,
      reconnectGraceMs: 60_000,
      logger,
    });
    const addresses = new Map<AgentConnection, string>();
    const claims = createTunnelClaims({
      sessions,
      tcp,
      logger,
      maxNamesPerOwner: 10,
      reconnectGraceMs: 60_000,
      namesHeld: () => 0,
      anonymousAddress: (connection) => addresses.get(connection),
      urlsFor: (name) => ({ url: name, urls: [name] }),
      tcpUrlFor: (port) => String(port),
    });
    const anonymous = (owner: string, address: string): AgentConnection => {
      const connection = {
        owner,
        name: `main-${owner}`,
        session: { closed: false },
      } as unknown as AgentConnection;
      addresses.set(connection, address);
      return connection;
    };
    try {
      const first = await claims.claim(anonymous('key-a', '192.0.2.1'), [{ tcp: 'any' }]);
      expect(first.entries).toHaveLength(1);
      // Another agent key from the same address: its port would be one more for that address.
      const second = await claims.claim(anonymous('key-b', '192.0.2.1'), [{ tcp: 'any' }]);
      expect(second.answers).toMatchObject([{ error: { code: EdgeErrorCode.TOO_MANY_TCP_PORTS } }]);
      const elsewhere = await claims.claim(anonymous('key-c', '192.0.2.2'), [{ tcp: 'any' }]);
      expect(elsewhere.entries).toHaveLength(1);
    } finally {
      tcp.close();
    }
  });

  it("a second run of the same key is refused the port the first run's session serves; the first keeps it", async () => {
    const logger = pino({ level: 'silent' });
    const sessions = new SessionTable({
      registry: createMemoryRegistry(),
      nodeId: 'node-a',
      leaseTtlMs: 60_000,
      reconnectGraceMs: 60_000,
      maxArrivalWaiters: 8,
      logger,
    });
    tables.push(sessions);
    const tcp = new TcpTunnels({
      range: await freeRange(4),
      host: '127.0.0.1',
      maxPortsPerOwner: 4,
      reconnectGraceMs: 60_000,
      logger,
    });
    const claims = createTunnelClaims({
      sessions,
      tcp,
      logger,
      maxNamesPerOwner: 10,
      reconnectGraceMs: 60_000,
      namesHeld: () => 0,
      anonymousAddress: () => '192.0.2.1',
      urlsFor: (name) => ({ url: name, urls: [name] }),
      tcpUrlFor: (port) => String(port),
    });
    const run = (id: string): AgentConnection =>
      ({
        owner: 'key-a',
        name: `main-${id}`,
        run: id,
        connectedAt: Date.now(),
        session: { closed: false },
      }) as unknown as AgentConnection;
    try {
      const first = await claims.claim(run('r1'), [{ tcp: 'any' }]);
      const served = first.entries[0]!;
      const port = served.port!;
      tcp.attach(port, served);
      const second = await claims.claim(run('r2'), [{ tcp: port.port }]);
      expect(second.entries).toEqual([]);
      expect(second.answers).toMatchObject([{ error: { code: EdgeErrorCode.TCP_PORT_UNAVAILABLE } }]);
      expect(JSON.stringify(second.answers)).toContain(
        `port ${port.port} is already served by another tunnel2 run of yours`,
      );
      expect(port.connection).toBe(served);
      // The same run reconnecting takes it over, as before.
      expect((await claims.claim(run('r1'), [{ tcp: port.port }])).entries).toHaveLength(1);
    } finally {
      tcp.close();
    }
  });
});
