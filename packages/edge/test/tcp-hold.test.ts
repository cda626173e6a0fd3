import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster/cluster.js';
import { TcpHolds, type TcpHoldsOptions } from '../src/cluster/tcp-hold.js';
import { InFlight } from '../src/in-flight.js';
import type { TcpCounters } from '../src/tcp-connection.js';
import { loneCluster } from './support/lone-cluster.js';

// Connections held while their port's agent is away (cluster/tcp-hold.ts), against a real Cluster on the
// memory registry and real loopback sockets: what is bounded (per port, per node, in time) and what a
// draining node counts as in flight. The carry across nodes is tested with real processes
// (packages/cli/test/e2e-cluster-tcp-faults.test.ts).

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const silent = pino({ level: 'silent' });

function counters(): TcpCounters {
  return {
    connections: { accepted: 0, forbidden: 0, no_agent: 0, refused: 0, forwarded: 0 },
    bytes: { in: 0, out: 0 },
    open: 0,
    held: 0,
  };
}

function cluster(registry: SessionRegistry): Cluster {
  const created = loneCluster(registry);
  cleanups.push(() => created.close());
  return created;
}

/**
 * Ports 1 and 2 are this node's in the registry, their agent away (reconnecting): every connection is
 * held. A listener hands what it accepts to the holds as the port `portOf` names.
 */
async function holding(options: Partial<TcpHoldsOptions>) {
  const registry = createMemoryRegistry();
  for (const port of [1, 2]) {
    const claimed = await registry.claim({
      name: `tcp:${port}`,
      owner: 'o',
      nodeId: 'node-a',
      ttlMs: 60_000,
    });
    if (claimed.ok) await registry.markDisconnected(`tcp:${port}`, claimed.record.epoch, 60_000);
  }
  const inFlight = new InFlight();
  const tcp = counters();
  const holds = new TcpHolds({
    cluster: cluster(registry),
    counters: tcp,
    inFlight,
    carried: new Set(),
    reconnectWaitMs: 60_000,
    maxPerPort: 100,
    maxPerNode: 100,
    servedHere: () => undefined,
    logger: silent,
    ...options,
  });
  cleanups.push(() => holds.close());
  let nextPort = 1;
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => holds.route(nextPort, socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.close();
  });
  const address = (server.address() as AddressInfo).port;
  const clients: Socket[] = [];
  cleanups.push(() => {
    for (const client of clients) client.destroy();
  });
  /** A client to `port`, and how its connection ends. */
  const client = async (port: number): Promise<{ socket: Socket; ends: Promise<string> }> => {
    nextPort = port;
    const socket = connect({ port: address, host: '127.0.0.1' });
    clients.push(socket);
    const ends = howItEnds(socket);
    // A refused connection may be reset before its 'connect' is seen.
    await Promise.race([once(socket, 'connect').catch(() => undefined), ends]);
    return { socket, ends };
  };
  /** Waits (bounded) until the holds have taken `count` connections. */
  const held = async (count: number): Promise<void> => {
    for (let i = 0; i < 500 && tcp.held < count; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  return { holds, inFlight, tcp, client, held };
}

function howItEnds(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.on('data', () => {});
    socket.once('end', () => resolve('end'));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

describe('TCP connections held for an agent that is away', () => {
  it('holds at most maxPerPort per port: one more is reset at once, another port still holds', async () => {
    const { tcp, inFlight, client, held } = await holding({ maxPerPort: 2 });
    const first = await client(1);
    await client(1);
    await held(2);
    expect(await (await client(1)).ends).toBe('ECONNRESET');
    await client(2);
    await held(3);
    expect(tcp.held).toBe(3);
    // Held connections count as in flight: a draining node waits for them.
    expect(inFlight.count).toBe(3);
    expect(tcp.connections.no_agent).toBe(1);
    expect(await Promise.race([first.ends, Promise.resolve('held')])).toBe('held');
  });

  it('holds at most maxPerNode across ports', async () => {
    const { tcp, client, held } = await holding({ maxPerNode: 2 });
    await client(1);
    await client(2);
    await held(2);
    expect(await (await client(2)).ends).toBe('ECONNRESET');
    expect(tcp.held).toBe(2);
  });

  it('resets a held connection once reconnectWaitMs runs out, and stops counting it', async () => {
    const { tcp, inFlight, client } = await holding({ reconnectWaitMs: 300 });
    expect(await (await client(1)).ends).toBe('ECONNRESET');
    expect(tcp.held).toBe(0);
    expect(inFlight.count).toBe(0);
    expect(tcp.connections.no_agent).toBe(1);
  });

  it('resets every held connection when the node closes', async () => {
    const { holds, tcp, inFlight, client, held } = await holding({});
    const ends = [(await client(1)).ends, (await client(2)).ends];
    await held(2);
    holds.close();
    expect(await Promise.all(ends)).toEqual(['ECONNRESET', 'ECONNRESET']);
    expect(tcp.held).toBe(0);
    expect(inFlight.count).toBe(0);
  });

  it('stops counting a connection its client closed while held', async () => {
    const { tcp, inFlight, client, held } = await holding({});
    const { socket } = await client(1);
    await held(1);
    expect(inFlight.count).toBe(1);
    // The client resets: the hold ends when its socket closes, not at its deadline (60 s here). A client
    // FIN alone is a half-close, not a departure: that connection is still carried, its data and FIN too.
    const idle = inFlight.idle(30_000);
    socket.resetAndDestroy();
    expect(await idle).toBe(true);
    expect(tcp.held).toBe(0);
  });
});
