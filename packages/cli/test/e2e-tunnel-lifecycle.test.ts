import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer, connect as netConnect, type Socket } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentErrorCode, connect, connectMany, connectTcp, Tunnel } from '../src/index.js';
import { silent } from './support/stack.js';
import { sendAndHash, startHashServer } from './support/tcp-stack.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startEdge(options: Parameters<typeof buildEdge>[0] = {}): Promise<Edge> {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  return edge;
}

/** Whether the inspector (or anything) still answers on the URL's port: only a refusal means it is gone. */
function answers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  const socket = netConnect({ host: hostname, port: Number(port) });
  return new Promise((resolve) => {
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code !== 'ECONNREFUSED'));
  });
}

/** The tunnel's 'close' (events.once would reject at the 'error' that comes first). */
function closeOf(tunnel: Tunnel): Promise<void> {
  return new Promise((resolve) => tunnel.once('close', resolve));
}

/** A port that refuses connections: listened on, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * Two adjacent ports the host has free a moment ago, as an edge's whole TCP range: both are checked (the
 * port after a free one may well be another test's).
 */
async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = await closedPort();
    const second = createServer().listen({ port: first + 1, host: '127.0.0.1', exclusive: true });
    const free = await new Promise<boolean>((resolve) => {
      second.once('listening', () => resolve(true));
      second.once('error', () => resolve(false));
    });
    if (free) {
      second.close();
      await once(second, 'close');
      return first;
    }
  }
  throw new Error('no two adjacent free ports in 50 tries');
}

describe('a tunnel stopped by a refusal releases what it holds', () => {
  it('a name taken on the first connect: start() rejects and the inspector stops listening', async () => {
    const edge = await startEdge();
    const holder = await connect({ target: 1, server: edge.url, subdomain: 'taken' });
    cleanups.push(() => holder.close(0));
    const tunnel = new Tunnel({ target: 1, server: edge.url, subdomain: 'taken', inspect: { port: 0 } });
    tunnel.on('error', () => {});
    const closed = closeOf(tunnel);
    await expect(tunnel.start()).rejects.toMatchObject({ edgeCode: 'TUNNEL2_ERR_NAME_IN_USE', fatal: true });
    const inspectorUrl = tunnel.inspectorUrl ?? '';
    expect(inspectorUrl).not.toBe('');
    await closed;
    expect(await answers(inspectorUrl)).toBe(false);
    // close() after the refusal still resolves (it used to return before anything was released).
    await tunnel.close(0);
  });

  it('closed while its inspector starts: start() rejects and the inspector stops listening', async () => {
    const edge = await startEdge();
    const tunnel = new Tunnel({ target: 1, server: edge.url, inspect: { port: 0 } });
    const started = tunnel.start();
    await tunnel.close(0);
    await expect(started).rejects.toMatchObject({ code: AgentErrorCode.CLOSED });
    expect(await answers(tunnel.inspectorUrl ?? '')).toBe(false);
  });

  it('closed while its first connect hangs (an address that never answers): close() returns, start() rejects', async () => {
    const held: Socket[] = [];
    const mute = createServer((socket) => {
      held.push(socket);
      socket.resume();
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    cleanups.push(async () => {
      for (const socket of held) socket.destroy();
      mute.close();
    });
    const { port } = mute.address() as AddressInfo;
    const tunnel = new Tunnel({ target: 1, server: `http://127.0.0.1:${port}`, inspect: false });
    tunnel.on('error', () => {});
    const connected = once(mute, 'connection');
    const started = tunnel.start();
    await connected;
    await tunnel.close();
    await expect(started).rejects.toMatchObject({ code: AgentErrorCode.CLOSED });
  });

  it('replaced by another agent at runtime: the inspector stops listening', async () => {
    const edge = await startEdge({ auth: { tokens: ['t'] } });
    const first = new Tunnel({
      target: 1,
      server: edge.url,
      subdomain: 'same',
      token: 't',
      inspect: { port: 0 },
    });
    const errors: unknown[] = [];
    first.on('error', (e) => errors.push(e));
    await first.start();
    const inspectorUrl = first.inspectorUrl ?? '';
    expect(await answers(inspectorUrl)).toBe(true);
    const closed = closeOf(first);
    const second = await connect({ target: 1, server: edge.url, subdomain: 'same', token: 't' });
    cleanups.push(() => second.close(0));
    await closed;
    expect(errors).toMatchObject([{ code: AgentErrorCode.REPLACED, fatal: true }]);
    expect(await answers(inspectorUrl)).toBe(false);
  });
});

describe('TCP tunnel targets', () => {
  it('refuses a TCP target without a port, naming the accepted forms', () => {
    expect(() => new Tunnel({ target: 'db', tcp: {} })).toThrow(
      expect.objectContaining({
        code: AgentErrorCode.INVALID_TARGET,
        message: expect.stringMatching(/host:port/),
      }),
    );
    expect(() => new Tunnel({ target: 'http://localhost:5432', tcp: {} })).toThrow(
      expect.objectContaining({ code: AgentErrorCode.INVALID_TARGET }),
    );
  });

  it('takes a port, host:port and [v6]:port', () => {
    expect(new Tunnel({ target: 5432, tcp: {} }).target.host).toBe('localhost:5432');
    expect(new Tunnel({ target: 'db.internal:5432', tcp: {} }).target.host).toBe('db.internal:5432');
    expect(new Tunnel({ target: '[::1]:5432', tcp: {} }).target.host).toBe('[::1]:5432');
  });
});

describe('a TCP tunnel whose port was taken while it was away', () => {
  it('without --remote-port: takes another port and announces it', async () => {
    const backend = await startHashServer();
    cleanups.push(backend.close);
    const first = await freePortPair();
    const range = `${first}-${first + 1}`;
    let edge = buildEdge({ port: 0, logger: silent, tcpPorts: range });
    await edge.listen();
    const edgePort = Number(new URL(edge.url).port);
    const tunnel = await connectTcp({
      target: backend.port,
      server: edge.url,
      reconnect: { initialMs: 10, maxMs: 50 },
    });
    cleanups.push(() => tunnel.close(0));
    const had = tunnel.info?.tcp?.port ?? 0;
    // The edge restarts; meanwhile another process takes the port the tunnel had.
    await edge.close(0);
    const squatter = createServer().listen({ port: had, host: '127.0.0.1', exclusive: true });
    await once(squatter, 'listening');
    cleanups.push(async () => void squatter.close());
    // Not events.once, which rejects on a refused reconnect's 'error' (see below).
    const ready = new Promise<unknown[]>((resolve) =>
      tunnel.once('ready', (...args: unknown[]) => resolve(args)),
    );
    edge = buildEdge({ port: edgePort, logger: silent, tcpPorts: range });
    await edge.listen();
    const restarted = edge;
    cleanups.push(() => restarted.close(0));
    const [info] = (await ready) as [{ url: string; tcp?: { port: number } }];
    const now = info.tcp?.port ?? 0;
    expect(now).not.toBe(had);
    expect(info.url).toBe(`tcp://localhost:${now}`);
    expect(tunnel.url).toBe(info.url);
    const { sent, answer } = await sendAndHash(now, 1000);
    expect(answer).toBe(sent);
  });

  it('a listed tunnel of tunnel2 start (no remote_port): takes another port and announces it', async () => {
    const backend = await startHashServer();
    cleanups.push(backend.close);
    const web = createHttpServer((_req, res) => res.end('web'));
    web.listen(0, '127.0.0.1');
    await once(web, 'listening');
    cleanups.push(async () => void web.close());
    const first = await freePortPair();
    const range = `${first}-${first + 1}`;
    let edge = buildEdge({ port: 0, logger: silent, tcpPorts: range });
    await edge.listen();
    const edgePort = Number(new URL(edge.url).port);
    const group = await connectMany({
      server: edge.url,
      reconnect: { initialMs: 10, maxMs: 50 },
      tunnels: [
        { name: 'web', target: (web.address() as { port: number }).port, subdomain: 'lifecycle-web' },
        { name: 'db', target: backend.port, tcp: {} },
      ],
    });
    cleanups.push(() => group.close(0));
    const db = group.tunnels[1];
    const had = db?.info?.tcp?.port ?? 0;
    const dbName = db?.info?.name;
    await edge.close(0);
    const squatter = createServer().listen({ port: had, host: '127.0.0.1', exclusive: true });
    await once(squatter, 'listening');
    cleanups.push(async () => void squatter.close());
    const ready = once(db as Tunnel, 'ready');
    const errors: unknown[] = [];
    group.on('error', (error) => errors.push(error));
    edge = buildEdge({ port: edgePort, logger: silent, tcpPorts: range });
    await edge.listen();
    const restarted = edge;
    cleanups.push(() => restarted.close(0));
    // A refusal that ends the group ends the wait too (then `errors` says why).
    const ended = closeOf(group).then(() => [{ url: 'closed' }]);
    const [info] = (await Promise.race([ready, ended])) as [{ url: string; tcp?: { port: number } }];
    expect(errors).toEqual([]);
    const now = info.tcp?.port ?? 0;
    expect(now).not.toBe(had);
    expect(db?.url).toBe(`tcp://localhost:${now}`);
    expect(group.info?.name).toBe('lifecycle-web');
    expect(db?.info?.name).toBe(dbName);
    expect(errors).toEqual([]);
    const { sent, answer } = await sendAndHash(now, 1000);
    expect(answer).toBe(sent);
  });
});

/**
 * A TCP relay in front of the edge that a test can cut (its listener closed and its connections destroyed,
 * so the agent's reconnects are refused) and restore on the same port.
 */
async function cuttableRelay(
  to: number,
): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>();
  const make = () =>
    createServer((client) => {
      const upstream = netConnect({ host: '127.0.0.1', port: to });
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
  let server = make().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  cleanups.push(async () => {
    server.close();
    for (const s of sockets) s.destroy();
  });
  return {
    port,
    async cut() {
      server.close();
      for (const s of sockets) s.destroy();
      await once(server, 'close');
    },
    async restore() {
      server = make().listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
  };
}

describe('an HTTP tunnel whose random name was taken while it was away', () => {
  it('without --subdomain: takes a new random name and announces it', async () => {
    const backend = createHttpServer((_req, res) => res.end('mine'));
    backend.listen(0, '127.0.0.1');
    await once(backend, 'listening');
    cleanups.push(async () => void backend.close());
    const edge = await startEdge({ auth: { tokens: ['tok-a', 'tok-b'] }, reconnectGraceMs: 100 });
    const relay = await cuttableRelay(Number(new URL(edge.url).port));
    const tunnel = await connect({
      target: (backend.address() as { port: number }).port,
      server: `http://localhost:${relay.port}`,
      token: 'tok-a',
      reconnect: { initialMs: 20, maxMs: 50 },
    });
    cleanups.push(() => tunnel.close(0));
    const had = tunnel.info?.name ?? '';
    const errors: unknown[] = [];
    tunnel.on('error', (error) => errors.push(error));
    // The agent is cut off past its grace; someone who saw the public URL claims the name meanwhile.
    await relay.cut();
    const squatter = await (async () => {
      for (let i = 0; i < 200; i++) {
        try {
          return await connect({ target: 9, server: edge.url, token: 'tok-b', subdomain: had });
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      }
      throw new Error(`the name ${had} never became free`);
    })();
    cleanups.push(() => squatter.close(0));
    // Not events.once: it rejects on the first 'error', and a reconnect attempt refused while the relay is
    // cut may still report one after this point on a busy machine (seen in CI).
    const ready = new Promise<unknown[]>((resolve) =>
      tunnel.once('ready', (...args: unknown[]) => resolve(args)),
    );
    await relay.restore();
    const [info] = (await Promise.race([ready, closeOf(tunnel).then(() => [{ name: 'closed' }])])) as [
      { name: string; url: string },
    ];
    expect(info.name).not.toBe(had);
    expect(info.name).toMatch(/^[a-z2-7]{26}$/);
    expect(tunnel.url).toBe(info.url);
    // The edge's 409 for the old name was a step on the way, not the end: the tunnel goes on.
    expect(errors.every((e) => (e as { fatal?: boolean }).fatal !== true)).toBe(true);
    const answer = await fetch(`${edge.url}/session/${info.name}/`);
    expect(await answer.text()).toBe('mine');
  });
});
