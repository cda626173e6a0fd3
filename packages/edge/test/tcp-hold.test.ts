import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { ErrorCode, type MuxStream, StreamResetError } from '@tunnel2/protocol';
import { createMemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Cluster } from '../src/cluster/cluster.js';
import type { LinkOpening } from '../src/cluster/link/node-link.js';
import { ReplicaRoutes } from '../src/cluster/replica-routes.js';
import { TcpHolds, type TcpHoldsOptions } from '../src/cluster/tcp/tcp-hold.js';
import { InFlight } from '../src/exchange/in-flight.js';
import type { OwnerEntry, OwnerFinding } from '../src/public/cross-node.js';
import type { TcpCounters } from '../src/tcp/tcp-connection.js';
import { loneCluster } from './support/lone-cluster.js';

// Connections held while their port's agent is away (cluster/tcp/tcp-hold.ts), against a real Cluster on the
// memory registry and real loopback sockets: what is bounded (per port, per node, in time) and what a
// draining node counts as in flight. Then against a stand-in for the cluster's registry answers and node
// links (real client sockets still): what a holder's answers do to a held connection. The carry across
// nodes is tested with real processes (packages/cli/test/e2e-cluster-tcp-faults.test.ts).

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
  const { client } = await listening(holds);
  /** Waits (bounded) until the holds have taken `count` connections. */
  const held = async (count: number): Promise<void> => {
    await until(() => tcp.held >= count);
  };
  return { holds, inFlight, tcp, client, held };
}

/** Waits, bounded in count and time, until `done` holds (the holds work on timers and socket events). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** A listener handing what it accepts to `holds` as the port the client named. */
async function listening(holds: TcpHolds) {
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
  return { client };
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

/** What a stand-in holder does with a connection carried to it. */
type HolderAnswer = 'accept' | 'refuse' | 'unreachable';

/** A link stream to a stand-in holder: what the carry sent on it. */
interface CarriedStream {
  readonly stream: MuxStream;
  readonly received: Buffer[];
}

/**
 * Holds backed by a stand-in for the cluster: `find` answers the registry read, `cached` the owner cache,
 * and each link stream opened to the holder gets the next of `answers` (the last one repeats).
 */
async function carrying(input: {
  cached?: (port: number) => OwnerEntry | undefined;
  find: (port: number) => Promise<OwnerFinding>;
  answers: HolderAnswer[];
  /** The holder answers nothing before this settles. */
  answering?: Promise<void>;
  options?: Partial<TcpHoldsOptions>;
}) {
  const tcp = counters();
  const inFlight = new InFlight();
  const carried: CarriedStream[] = [];
  let opens = 0;
  const stream = (): CarriedStream => {
    const received: Buffer[] = [];
    const fake = {
      handler: undefined,
      closed: false,
      localEnded: false,
      remoteEnded: false,
      sendHeaders: () => {},
      write: (chunk: Buffer) => received.push(chunk) > 0,
      end: () => {},
      reset: () => {},
      consume: () => {},
    };
    return { stream: fake as unknown as MuxStream, received };
  };
  const open = (_url: string, _tenant: unknown, done: (opening: LinkOpening) => void): void => {
    const answer = input.answers[Math.min(opens++, input.answers.length - 1)];
    void (input.answering ?? Promise.resolve()).then(() => {
      if (answer === 'unreachable') {
        done({ failed: 'unreachable', err: new Error('holder down') });
        return;
      }
      const link = stream();
      carried.push(link);
      done({ stream: link.stream, maxFrameSize: 16_384, tcp: true });
      setImmediate(() => {
        if (answer === 'accept') link.stream.handler?.onHeaders(Buffer.alloc(0), false);
        else link.stream.handler?.onReset(new StreamResetError(ErrorCode.REFUSED_STREAM));
      });
    });
  };
  const cluster = {
    links: { open, forget: () => {} },
    cachedOwner: (name: string) => input.cached?.(Number(name.slice('tcp:'.length))),
    find: (name: string) => input.find(Number(name.slice('tcp:'.length))),
    notHere: () => {},
    unreachable: () => {},
    // No port here is served by replicas: the real routes, which never learn a set.
    replicas: new ReplicaRoutes({ nodeId: 'here', ttlMs: 1000, maxEntries: 0, refresh: () => {} }),
  } as unknown as Cluster;
  const holds = new TcpHolds({
    cluster,
    counters: tcp,
    inFlight,
    carried: new Set(),
    reconnectWaitMs: 10_000,
    maxPerPort: 100,
    maxPerNode: 100,
    servedHere: () => undefined,
    logger: silent,
    ...input.options,
  });
  cleanups.push(() => holds.close());
  const { client } = await listening(holds);
  return { tcp, inFlight, carried, client, opens: () => opens };
}

const holderC: OwnerEntry = { nodeId: 'node-c', url: 'http://127.0.0.1:1', epoch: 1 };
const live = (): Promise<OwnerFinding> => Promise.resolve({ state: 'remote', entry: holderC });
const away = (): Promise<OwnerFinding> => Promise.resolve({ state: 'pending' });

describe('TCP connections carried to a holder that refuses or cannot be reached', () => {
  it('tries a holder that said "not here" again (its session was starting): the connection gets through, bytes sent while held first', async () => {
    const { tcp, carried, client, opens } = await carrying({ find: live, answers: ['refuse', 'accept'] });
    const { socket } = await client(1);
    // Sent while the connection waits: Node buffers it in the socket, the carry sends it once accepted.
    socket.write('sent while held');
    await until(() => tcp.connections.forwarded === 1 && carried[1]?.received.length === 1);
    expect(opens()).toBe(2);
    expect(Buffer.concat(carried[1]?.received ?? []).toString()).toBe('sent while held');
    expect(tcp.connections.no_agent).toBe(0);
    expect(tcp.held).toBe(0);
  });

  it('carries to a live owner however full the holds are: the bounds apply to connections that wait', async () => {
    // Port 1's agent is away (its connections wait), port 2's is live, cached or read from the registry.
    const { tcp, client } = await carrying({
      cached: (port) => (port === 2 ? holderC : undefined),
      find: (port) => (port === 3 ? live() : away()),
      answers: ['accept'],
      options: { maxPerPort: 2, maxPerNode: 2 },
    });
    await client(1);
    await client(1);
    await until(() => tcp.held === 2);
    await client(2);
    await client(3);
    await until(() => tcp.connections.forwarded === 2);
    expect(tcp.connections.forwarded).toBe(2);
    expect(tcp.connections.no_agent).toBe(0);
    expect(tcp.held).toBe(2);
  });

  it('carries to a live owner with maxPerPort 0 (no connection may wait)', async () => {
    const { tcp, client } = await carrying({
      cached: (port) => (port === 2 ? holderC : undefined),
      find: live,
      answers: ['accept'],
      options: { maxPerPort: 0 },
    });
    await client(1);
    await client(2);
    await until(() => tcp.connections.forwarded === 2);
    expect(tcp.connections.forwarded).toBe(2);
    expect(tcp.connections.no_agent).toBe(0);
  });

  it('bounds connections back from an unreachable holder: 10 in, limits 2 and 2, at most 2 held', async () => {
    let answer: () => void = () => {};
    const answering = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const { tcp, inFlight, client, opens } = await carrying({
      cached: () => holderC,
      find: away,
      answers: ['unreachable'],
      answering,
      options: { maxPerPort: 2, maxPerNode: 2 },
    });
    // All ten are on their way to the holder (none waits, none is bounded) before it fails them all.
    for (let i = 0; i < 10; i++) await client(1);
    await until(() => opens() === 10);
    expect(tcp.held).toBe(0);
    answer();
    await until(() => tcp.connections.no_agent === 8);
    expect(tcp.connections.no_agent).toBe(8);
    expect(tcp.held).toBe(2);
    expect(inFlight.count).toBe(2);
  });

  it('stops counting a connection whose client resets while the registry is read', async () => {
    let answer: (finding: OwnerFinding) => void = () => {};
    const pending = new Promise<OwnerFinding>((resolve) => {
      answer = resolve;
    });
    const { tcp, inFlight, client } = await carrying({ find: () => pending, answers: ['accept'] });
    const { socket } = await client(1);
    await until(() => tcp.held === 1);
    const idle = inFlight.idle(30_000);
    socket.resetAndDestroy();
    expect(await idle).toBe(true);
    expect(tcp.held).toBe(0);
    answer({ state: 'pending' });
  });
});
