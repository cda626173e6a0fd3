import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { currentRss, peakRss, type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const ROUNDS = 3;
/** Per round: half slow uploads, half downloads never read. */
const CONNECTIONS = 2_000;
/** The agent's default stream limit (protocol maxConcurrentStreams): the edge holds the rest waiting. */
const AGENT_STREAMS = 1_000;
const MB = 1_000_000;

/**
 * Uploads are never read nor answered; a download gets a head promising 10 MB and 64 KB of it, then
 * nothing: every exchange holds a backend connection, and past the pool's 256 they wait in the agent's line.
 */
async function startStallingBackend() {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.once('data', (chunk: Buffer) => {
      const head = chunk.toString('latin1');
      if (head.startsWith('GET /ping ')) {
        socket.end('HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npong');
      } else if (head.startsWith('GET /download ')) {
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n');
        socket.write(Buffer.alloc(64 * 1024, 0x61));
      }
      socket.pause();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function open(port: number, request: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write(request);
  socket.pause(); // a download is never read
  return socket;
}

it('thousands of slow uploads and unread downloads, abandoned at once, round after round: the agent keeps serving', async () => {
  const backend = await startStallingBackend();
  cleanups.push(() => backend.close());
  // Room for every connection to reach the agent or wait for a stream slot there, as in the review.
  const edge: Edge = buildEdge({
    port: 0,
    logger: silent,
    maxStreamsPerSession: CONNECTIONS * 2,
    maxWaitingPerSession: CONNECTIONS * 2,
    streamWaitMs: 60_000,
  });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const agent: Spawned = spawnCli([
    'http',
    String(backend.port),
    '--server',
    url,
    '--subdomain',
    'soak',
    '--json',
  ]);
  cleanups.push(() => agent.kill('SIGKILL'));
  await agent.waitFor('ready');
  const host = `soak.localhost:${port}`;
  const session = edge.sessions.get('soak');
  const streams = (): number => session?.session.streams.size ?? 0;
  const waiting = (): number => session?.slots.waiting ?? 0;
  const ping = () => send({ port, path: '/ping', headers: ['Host', host] });

  expect((await ping()).status).toBe(200);
  const pid = agent.child.pid!;
  const rssBefore = currentRss(pid);
  const upload = `POST /upload HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1000000\r\n\r\nx`;
  const download = `GET /download HTTP/1.1\r\nHost: ${host}\r\n\r\n`;

  for (let round = 1; round <= ROUNDS; round++) {
    const clients: Socket[] = [];
    for (let i = 0; i < CONNECTIONS; i++) clients.push(await open(port, i % 2 === 0 ? upload : download));
    // Every stream slot of the agent is taken (the pool's 256 busy, the rest waiting in the agent's line) and the
    // other connections wait at the edge.
    await until(() => streams() === AGENT_STREAMS && waiting() === CONNECTIONS - AGENT_STREAMS);
    const rssLoaded = currentRss(pid);
    for (const socket of clients) socket.destroy();
    await until(() => (streams() === 0 && waiting() === 0) || agent.child.exitCode !== null);
    expect(agent.child.exitCode, agent.stderr()).toBeNull();
    const res = await ping();
    expect(res.status).toBe(200);
    console.log(
      `round ${round}: ${CONNECTIONS} connections (${AGENT_STREAMS} streams at the agent) abandoned; ` +
        `agent RSS loaded ${(rssLoaded / MB).toFixed(1)} MB, after ${(currentRss(pid) / MB).toFixed(1)} MB`,
    );
  }

  const rssAfter = currentRss(pid);
  console.log(
    `agent RSS before ${(rssBefore / MB).toFixed(1)} MB, peak ${(peakRss(pid) / MB).toFixed(1)} MB, ` +
      `after ${ROUNDS} rounds ${(rssAfter / MB).toFixed(1)} MB`,
  );
  // The same session all along: the agent never exited, never reconnected, and reported nothing wrong.
  expect(edge.sessions.get('soak')).toBe(session);
  expect(agent.child.exitCode).toBeNull();
  expect(agent.stderr()).toBe('');
  expect(streams()).toBe(0);
  // Measured: ~93 MB before; after 3 rounds ~145 MB with the inspector off (GC and allocator slack) and
  // ~193 MB with it on, as here: it keeps the last 1,000 of these exchanges with their 64 KB bodies, within
  // its 64 MiB budget (--inspect-budget), so the bound allows that budget on top. A leak of every abandoned
  // exchange (6,000 here) would grow far past it.
  const inspectorBudget = 64 * 1024 * 1024;
  expect(rssAfter).toBeLessThan(rssBefore + 100 * MB + inspectorBudget);
}, 90_000);
