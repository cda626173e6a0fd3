import { once } from 'node:events';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { ErrorCode, MuxSession } from '@tunnel2/protocol';
import { freePort } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import { howItEnds } from './support/tcp-stack.js';

// Three real agent processes (`tunnel2 tcp … --remote-port P --replica`) share one public TCP port, each in
// front of its own backend, which greets every connection with its id and then echoes: where each public
// connection went, and what a kill -9 of one agent costs the connections open on it and on the others.

const TOKEN = 'token-a';
const IDS = ['r0', 'r1', 'r2'];

let edge: Edge;
let publicPort: number;
const backends: Server[] = [];
const agents: Spawned[] = [];
const opened: Socket[] = [];

async function startGreetingBackend(id: string): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.write(`${id}\n`);
    socket.pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as { port: number }).port };
}

/** Opens a public connection and resolves with it and the id of the backend that greeted it. */
async function openPublic(phase = ''): Promise<{ socket: Socket; id: string }> {
  const socket = netConnect({ port: publicPort, host: '127.0.0.1' });
  opened.push(socket);
  // A reset that ends a connection is what some steps expect (howItEnds and echoes look): never uncaught.
  socket.on('error', () => {});
  socket.setEncoding('utf8');
  let text = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: string): void => {
      text += chunk;
      const end = text.indexOf('\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('error', onError);
      resolve({ socket, id: text.slice(0, end) });
    };
    socket.on('data', onData);
    const onError = (err: Error): void => reject(new Error(`${phase}: ${err.message}`));
    socket.once('error', onError);
  });
}

/** The socket still carries bytes both ways (its backend echoes them). */
async function echoes(socket: Socket): Promise<boolean> {
  const word = `ping-${Math.random()}`;
  socket.write(word);
  let text = '';
  return new Promise((resolve) => {
    const onData = (chunk: string): void => {
      text += chunk;
      if (!text.includes(word)) return;
      socket.off('data', onData);
      resolve(true);
    };
    socket.on('data', onData);
    socket.once('error', () => resolve(false));
  });
}

/**
 * A replica of the port (token-a) whose every connection is refused before it is taken (REFUSED_STREAM), as
 * an agent does with a connection that reaches it after it sent its GOAWAY (SIGTERM) and before the edge
 * has read it: the race made certain. Returns the closer.
 */
async function refusingReplica(): Promise<() => void> {
  const ws = new WebSocket(
    `${edge.url.replace('http', 'ws')}/_tunnel2/connect?name=refuser&tcp=${publicPort}&replica=1`,
    { perMessageDeflate: false, headers: { authorization: `Bearer ${TOKEN}` } },
  );
  await once(ws, 'open');
  let answered: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    answered = resolve;
  });
  const session = new MuxSession({
    role: 'agent',
    settings: { heartbeatIntervalMs: 0 },
    transport: { send: (message, done) => ws.send(message, { binary: true }, done), close: () => ws.close() },
    handler: {
      onHello: () => answered(),
      onClose: () => {},
      onStream: (stream) => {
        stream.handler = {
          onHeaders: () => stream.reset(ErrorCode.REFUSED_STREAM),
          onData: (chunk) => stream.consume(chunk.length),
          onEnd: () => {},
          onReset: () => {},
          onDrain: () => {},
        };
      },
    },
  });
  ws.on('message', (data) => session.receive(data as Buffer));
  ws.on('close', () => session.transportClosed());
  session.sendHello({ agent: 'refusing', streamKinds: ['tcp'] }, false);
  await ready;
  return () => ws.terminate();
}

beforeAll(async () => {
  publicPort = await freePort();
  edge = buildEdge({
    port: 0,
    logger: silent,
    auth: { tokens: [TOKEN, 'token-b'] },
    tcpPorts: `${publicPort}-${publicPort}`,
  });
  await edge.listen();
  for (const id of IDS) {
    const backend = await startGreetingBackend(id);
    backends.push(backend.server);
    const agent = spawnCli([
      'tcp',
      String(backend.port),
      '--json',
      '--token',
      TOKEN,
      '--server',
      edge.url,
      '--remote-port',
      String(publicPort),
      '--replica',
    ]);
    agents.push(agent);
    await agent.waitFor('ready');
  }
}, 30_000);

afterAll(async () => {
  for (const socket of opened) socket.destroy();
  for (const agent of agents) agent.kill('SIGKILL');
  await Promise.all(agents.map((agent) => agent.exited));
  await edge?.close(0);
  for (const server of backends) server.close();
});

describe('TCP replicas (tunnel2 tcp --remote-port P --replica)', () => {
  it('three agents share the port; 30 connections spread over them; a kill -9 resets only its own; a draining one gets none', async () => {
    const ready = await Promise.all(agents.map((agent) => agent.waitFor('ready')));
    expect(ready.map((event) => event.url)).toEqual(IDS.map(() => `tcp://localhost:${publicPort}`));
    expect(ready.map((event) => event.replicas)).toEqual([1, 2, 3]);
    // Then each follows the port's count live (the edge's NOTICE), as an HTTP replica does its name's.
    const told = (i: number): unknown[] =>
      agents[i]?.events.filter((event) => event.event === 'replicas').map((event) => event.replicas) ?? [];
    await until(() => told(0).join() === '2,3' && told(1).join() === '3');

    // Held open, so each agent's count of open connections is what the edge balances by.
    const first: { socket: Socket; id: string }[] = [];
    for (let i = 0; i < 30; i++) first.push(await openPublic('first'));
    const counts = Object.fromEntries(IDS.map((id) => [id, first.filter((c) => c.id === id).length]));
    // Fewest open connections first: 10 each, given none closed (each must get at least 20 %).
    for (const id of IDS) expect(counts[id], JSON.stringify(counts)).toBeGreaterThanOrEqual(6);

    const onVictim = first.filter((c) => c.id === 'r1');
    const onOthers = first.filter((c) => c.id !== 'r1');
    const endings = onVictim.map((c) => howItEnds(c.socket));
    agents[1]?.kill('SIGKILL');
    await agents[1]?.exited;
    // Its connections are reset (their tunnel is gone); never a clean end that could pass for a full answer.
    expect(new Set(await Promise.all(endings))).toEqual(new Set(['ECONNRESET']));
    for (const c of onOthers) expect(await echoes(c.socket)).toBe(true);
    await until(() => told(0).join() === '2,3,2');

    await until(() => (edge.tcp?.counters.open ?? 0) === onOthers.length);
    const later: { socket: Socket; id: string }[] = [];
    for (let i = 0; i < 10; i++) later.push(await openPublic('later'));
    expect(later.every((c) => c.id === 'r0' || c.id === 'r2')).toBe(true);
    expect(later.some((c) => c.id === 'r0') && later.some((c) => c.id === 'r2')).toBe(true);

    // A replica told to stop (SIGTERM) drains: its open connections carry on, new ones go to the other.
    const onDraining = [...first, ...later].filter((c) => c.id === 'r2');
    agents[2]?.kill('SIGTERM');
    await agents[2]?.waitFor('finishing');
    // Once the edge has its GOAWAY (one that reaches the agent before is refused and goes to another: below).
    await until(() => [...edge.sessions.tunnels()].some((entry) => entry.session.draining));
    await until(() => told(0).join() === '2,3,2,1');
    const drained: { socket: Socket; id: string }[] = [];
    for (let i = 0; i < 5; i++) drained.push(await openPublic('drained'));
    expect(drained.map((c) => c.id)).toEqual(['r0', 'r0', 'r0', 'r0', 'r0']);
    for (const c of onDraining.slice(0, 3)) expect(await echoes(c.socket)).toBe(true);
    for (const c of onDraining) c.socket.end();
    expect(await agents[2]?.exited).toBe(0);
  }, 30_000);

  it('a connection a replica refuses before taking it (its GOAWAY on the way) goes to another one, bytes and all', async () => {
    const close = await refusingReplica();
    try {
      // The refusing replica has the fewest open connections: the edge tries it first, every time.
      for (let i = 0; i < 6; i++) {
        const c = await openPublic('refused');
        expect(IDS).toContain(c.id);
        expect(await echoes(c.socket)).toBe(true);
      }
    } finally {
      close();
    }
  }, 30_000);

  it('another token cannot join the port, with or without --replica', async () => {
    for (const asReplica of [['--replica'], []]) {
      const intruder = spawnCli([
        'tcp',
        '1',
        '--json',
        '--token',
        'token-b',
        '--server',
        edge.url,
        '--remote-port',
        String(publicPort),
        ...asReplica,
      ]);
      agents.push(intruder);
      expect(await intruder.exited).not.toBe(0);
      expect(JSON.stringify(intruder.events)).toContain(`port ${publicPort} is in use by another agent`);
    }
  }, 30_000);
});
