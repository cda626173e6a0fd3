import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The agent's default backend pool size (Tunnel's `connections`): more uploads than this wait in the agent's line for a connection. */
const POOL_CONNECTIONS = 256;

interface HoardingBackend {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Connections open now. */
  readonly open: number;
  /** Request heads received (each connection carries at most one). */
  readonly requests: number;
  close(): Promise<void>;
}

/**
 * A backend that answers `GET /ping` at once and never reads nor answers anything else: every upload sent
 * to it holds its connection, so the agent's pool fills and the next uploads wait in the agent's line (BackendQueue).
 */
async function startHoardingBackend(): Promise<HoardingBackend> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let requests = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.once('data', (chunk: Buffer) => {
      requests++;
      if (chunk.toString('latin1').startsWith('GET /ping ')) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npong');
        socket.end();
      } else socket.pause(); // never read the body, never answer
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    get accepted() {
      return accepted;
    },
    get open() {
      return sockets.size;
    },
    get requests() {
      return requests;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** An in-process edge and the real `tunnel2 http` process in front of `backendPort`. */
async function tunnel(backendPort: number, name: string) {
  const edge: Edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const agent: Spawned = spawnCli([
    'http',
    String(backendPort),
    '--server',
    url,
    '--subdomain',
    name,
    '--json',
  ]);
  cleanups.push(() => agent.kill('SIGKILL'));
  await agent.waitFor('ready');
  const streams = (): number => edge.sessions.get(name)?.session.streams.size ?? 0;
  return { edge, port, agent, host: `${name}.localhost:${port}`, streams };
}

/** Opens a POST that promises 1,000,000 bytes and sends one; resolves once the edge took the connection. */
async function openUpload(port: number, host: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write(`POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1000000\r\n\r\nx`);
  return socket;
}

describe('a public client cannot crash the agent', () => {
  it('uploads queued behind a full backend pool, all abandoned at once: the agent keeps serving', async () => {
    const backend = await startHoardingBackend();
    cleanups.push(() => backend.close());
    const { edge, port, host, agent, streams } = await tunnel(backend.port, 'queued');
    // More uploads than the pool has connections: the rest wait in the agent's line with their body streams.
    const count = POOL_CONNECTIONS + 200;
    const clients: Socket[] = [];
    cleanups.push(() => {
      for (const socket of clients) socket.destroy();
    });
    for (let i = 0; i < count; i++) clients.push(await openUpload(port, host));
    await until(() => streams() === count && backend.open === POOL_CONNECTIONS);
    const session = edge.sessions.get('queued');

    for (const socket of clients) socket.destroy();
    await until(() => streams() === 0 || agent.child.exitCode !== null);
    // Every reset is handled; a crash would show here, and in the agent's stderr.
    const res = await send({ port, path: '/ping', headers: ['Host', host] });
    expect(agent.child.exitCode, agent.stderr()).toBeNull();
    expect(agent.stderr()).toBe('');
    // The same session serves it: the agent neither exited nor reconnected.
    expect(edge.sessions.get('queued')).toBe(session);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('pong');
    // The abandoned uploads that waited in the agent's line never reached the backend and cost no connection
    // (at most one more than the pool's: a request undici may hold while its connections are all busy).
    console.log(
      `backend: ${backend.accepted} connections, ${backend.requests} requests for ${count} uploads`,
    );
    expect(backend.requests).toBe(POOL_CONNECTIONS + 1);
    expect(backend.accepted).toBeLessThanOrEqual(POOL_CONNECTIONS + 2);
  });
});
