import { once } from 'node:events';
import { type ClientHttp2Stream, constants, type IncomingHttpHeaders } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import {
  type HeldConnection,
  type HeldUpgradeBackend,
  startHeldUpgradeBackend,
} from './support/held-upgrade-backend.js';
import { silent, until } from './support/stack.js';
import { clientFrame, OPCODE } from './support/ws-frames.js';

// A WebSocket upgrade while the backend has not answered yet: the stream is open, the agent has a backend
// connection with the request on it, and the client may already be sending. Whatever ends the stream then
// (the edge's response timeout, the client leaving) must close that backend connection, and the client's
// early bytes must reach the backend after its 101, in order, held meanwhile (the agent holds what the edge
// passed on, at most 16 KiB; the rest waits unread in the client's connection).
// Over HTTP/1.1 (a raw client that does not wait for the 101) and RFC 8441 (h2c extended CONNECT) alike.

const MiB = 1024 * 1024;
/** The edge that gives up soon: its response timeout is what these tests wait for. */
const QUICK_TIMEOUT_MS = 1_500;

interface Stack {
  edge: Edge;
  tunnel: Tunnel;
  port: number;
}

let backend: HeldUpgradeBackend;
/** Response timeout QUICK_TIMEOUT_MS. */
let quick: Stack;
/** The default response timeout (60 s): nothing here waits for it. */
let patient: Stack;

async function startStack(responseTimeoutMs?: number): Promise<Stack> {
  const edge = buildEdge({
    port: 0,
    logger: silent,
    ...(responseTimeoutMs === undefined ? {} : { responseTimeoutMs }),
  });
  const { port } = await edge.listen();
  const tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'held' });
  return { edge, tunnel, port };
}

beforeAll(async () => {
  backend = await startHeldUpgradeBackend();
  quick = await startStack(QUICK_TIMEOUT_MS);
  patient = await startStack();
});

afterAll(async () => {
  for (const stack of [quick, patient]) {
    await stack.tunnel.close(0);
    await stack.edge.close(0);
  }
  await backend.close();
});

/** A raw HTTP/1.1 client that sends its upgrade request and, with it, `early` (no wait for the 101). */
interface RawClient {
  socket: Socket;
  /** Everything received so far, as latin1. */
  text(): string;
  /** Resolves once the received text matches `pattern`. */
  seen(pattern: RegExp): Promise<void>;
  closed: Promise<void>;
}

async function rawUpgrade(stack: Stack, path: string, early: Buffer = Buffer.alloc(0)): Promise<RawClient> {
  const socket = netConnect(stack.port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  let received = '';
  let onText: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
    onText?.();
  });
  const head =
    `GET ${path} HTTP/1.1\r\nHost: held.localhost:${stack.port}\r\nUpgrade: websocket\r\n` +
    'Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n';
  // One write: the early bytes travel right behind the head.
  socket.write(Buffer.concat([Buffer.from(head, 'latin1'), early]));
  return {
    socket,
    text: () => received,
    seen: (pattern) =>
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (!pattern.test(received)) return;
          onText = undefined;
          resolve();
        };
        onText = check;
        check();
      }),
    closed,
  };
}

/** An RFC 8441 stream whose first DATA (`early`) goes with the request, before any answer. */
async function h2Upgrade(
  stack: Stack,
  path: string,
  early: Buffer = Buffer.alloc(0),
): Promise<{
  stream: ClientHttp2Stream;
  response: Promise<IncomingHttpHeaders>;
  closed: Promise<void>;
  done(): void;
}> {
  const session = h2c(stack.port);
  await new Promise((resolve) => session.once('remoteSettings', resolve));
  const stream = session.request(
    {
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': path,
      ':authority': `held.localhost:${stack.port}`,
      'sec-websocket-version': '13',
    },
    { endStream: false },
  );
  stream.on('error', () => {});
  if (early.length > 0) stream.write(early);
  return {
    stream,
    response: new Promise((resolve) => stream.once('response', resolve)),
    closed: new Promise((resolve) => stream.once('close', () => resolve())),
    done: () => session.destroy(),
  };
}

/** Writes `total` bytes of a known pattern as fast as the socket takes them; `sent` counts what left. */
function pump(write: (chunk: Buffer) => boolean, onDrain: (resume: () => void) => void, total: number) {
  const chunk = Buffer.alloc(64 * 1024);
  for (let i = 0; i < chunk.length; i++) chunk[i] = i % 251;
  const state = { sent: 0 };
  const next = (): void => {
    while (state.sent < total) {
      state.sent += chunk.length;
      if (!write(chunk)) {
        onDrain(next);
        return;
      }
    }
  };
  next();
  return { state, expected: Buffer.concat(Array.from({ length: total / chunk.length }, () => chunk)) };
}

/** Resolves once `value()` has not changed for ten polls in a row: the writer is held back. */
async function steady(value: () => number): Promise<void> {
  let last = -1;
  let count = 0;
  await until(() => {
    count = value() === last ? count + 1 : 0;
    last = value();
    return count >= 10;
  });
}

describe('an HTTP/1.1 WebSocket upgrade the backend has not answered yet', () => {
  it("the edge's response timeout (504) closes the agent's backend connection; the bytes held go with it", async () => {
    const arriving = backend.next();
    const client = await rawUpgrade(quick, '/never', clientFrame(OPCODE.text, 'early bird'));
    const connection = await arriving;
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 504 /);
    await connection.closed;
    expect(Buffer.concat(connection.after).length).toBe(0);
  });

  it.each([
    { how: 'FIN', leave: (socket: Socket) => socket.end() },
    { how: 'RST', leave: (socket: Socket) => socket.resetAndDestroy() },
  ])(
    "a client that goes away ($how) before the answer closes the agent's backend connection",
    async ({ leave }) => {
      const arriving = backend.next();
      const client = await rawUpgrade(patient, '/never');
      const connection = await arriving;
      // A FIN before the 101 is a client gone (as for a plain request), not a half-close to pass on: the
      // backend's connection closed at once, not at the response timeout (60 s here).
      leave(client.socket);
      await connection.closed;
      await client.closed;
    },
  );

  it('bytes the client sent with its request reach the backend after the 101, in order', async () => {
    const arriving = backend.next();
    const early = clientFrame(OPCODE.text, 'early bird');
    const client = await rawUpgrade(patient, '/echo', early);
    const connection = await arriving;
    // Nothing before the backend's answer: the backend has not switched protocols yet.
    expect(Buffer.concat(connection.after).length).toBe(0);
    connection.accept();
    await client.seen(/^HTTP\/1\.1 101 /);
    const second = clientFrame(OPCODE.text, 'second');
    client.socket.write(second);
    const all = await connection.received(early.length + second.length);
    expect(all.equals(Buffer.concat([early, second]))).toBe(true);
    client.socket.destroy();
    await connection.closed;
  });

  it('a refusal drops the bytes held for the backend: they never reach it; the client gets the refusal', async () => {
    const arriving = backend.next();
    const client = await rawUpgrade(patient, '/refused', clientFrame(OPCODE.text, 'early bird'));
    const connection = await arriving;
    connection.socket.write('HTTP/1.1 403 Forbidden\r\nContent-Length: 12\r\n\r\nnot allowed!');
    await client.closed;
    expect(client.text()).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[\s\S]*\r\n\r\nnot allowed!$/);
    // The agent's connection goes with the refused exchange, and nothing followed the request on it.
    await connection.closed;
    expect(Buffer.concat(connection.after).length).toBe(0);
  });

  it('early bytes wait within the stream window while no answer comes (bounded), then all arrive after the 101', async () => {
    const arriving = backend.next();
    const client = await rawUpgrade(patient, '/slow');
    const connection = await arriving;
    const total = 64 * MiB;
    const { state, expected } = pump(
      (chunk) => client.socket.write(chunk),
      (resume) => client.socket.once('drain', resume),
      total,
    );
    await steady(() => state.sent);
    console.log(
      `the client got ${(state.sent / MiB).toFixed(1)} MiB of ${total / MiB} MiB out before the backend answered`,
    );
    // Held back by the edge's early limit (and the sockets' buffers), not taken in whole by the agent.
    expect(state.sent).toBeLessThan(total / 2);
    expect(Buffer.concat(connection.after).length).toBe(0);
    connection.accept();
    const all = await connection.received(total);
    expect(all.length).toBe(total);
    expect(all.equals(expected)).toBe(true);
    client.socket.destroy();
    await connection.closed;
  });
  it("many upgrades the backend has not answered cannot take the tunnel's window from the others", async () => {
    // Each sends a whole stream window (256 KiB) before any answer: 200 of them are more than the agent's
    // session window (16 + 32 MiB), which the bytes the agent holds would keep from every other stream.
    const waiting: { client: RawClient; connection: HeldConnection }[] = [];
    for (let i = 0; i < 200; i++) {
      const arriving = backend.next();
      const client = await rawUpgrade(patient, `/waiting-${i}`, Buffer.alloc(256 * 1024, 3));
      waiting.push({ client, connection: await arriving });
    }
    try {
      const arriving = backend.next();
      const client = await rawUpgrade(patient, '/answered');
      const connection = await arriving;
      connection.accept();
      await client.seen(/^HTTP\/1\.1 101 /);
      const total = 8 * MiB;
      const { expected } = pump(
        (chunk) => client.socket.write(chunk),
        (resume) => client.socket.once('drain', resume),
        total,
      );
      // Bounded: without the edge's limit it never came (the others held the whole session window).
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<Buffer>((resolve) => {
        timer = setTimeout(() => resolve(Buffer.alloc(0)), 20_000);
      });
      const all = await Promise.race([connection.received(total), gaveUp]);
      clearTimeout(timer);
      expect(all.equals(expected)).toBe(true);
      client.socket.destroy();
      await connection.closed;
    } finally {
      // The backend's side goes first: a client's FIN behind bytes the edge left unread is not seen before an
      // answer (as nginx does not see it), and here the agent's 502 is that answer.
      for (const { client, connection } of waiting) {
        connection.socket.destroy();
        client.socket.destroy();
      }
      await Promise.all(waiting.map(({ client }) => client.closed));
    }
  });
});

describe('an RFC 8441 WebSocket the backend has not answered yet', () => {
  it("the edge's response timeout (504) closes the agent's backend connection; the bytes held go with it", async () => {
    const arriving = backend.next();
    const ws = await h2Upgrade(quick, '/never', clientFrame(OPCODE.text, 'early bird'));
    const connection = await arriving;
    const head = await ws.response;
    expect(head[':status']).toBe(504);
    await connection.closed;
    expect(Buffer.concat(connection.after).length).toBe(0);
    ws.done();
  });

  it("a client that resets its stream before the answer closes the agent's backend connection", async () => {
    const arriving = backend.next();
    const ws = await h2Upgrade(patient, '/never');
    const connection = await arriving;
    ws.stream.close(constants.NGHTTP2_CANCEL);
    await connection.closed;
    ws.done();
  });

  it('bytes the client sent with its request reach the backend after the 101, in order', async () => {
    const arriving = backend.next();
    const early = clientFrame(OPCODE.text, 'early bird');
    const ws = await h2Upgrade(patient, '/echo', early);
    const connection = await arriving;
    connection.accept();
    expect((await ws.response)[':status']).toBe(200);
    const second = clientFrame(OPCODE.text, 'second');
    ws.stream.write(second);
    const all = await connection.received(early.length + second.length);
    expect(all.equals(Buffer.concat([early, second]))).toBe(true);
    ws.done();
    await connection.closed;
  });

  it('a refusal drops the bytes held for the backend: they never reach it', async () => {
    const arriving = backend.next();
    const ws = await h2Upgrade(patient, '/refused', clientFrame(OPCODE.text, 'early bird'));
    const connection = await arriving;
    connection.socket.write('HTTP/1.1 403 Forbidden\r\nContent-Length: 12\r\n\r\nnot allowed!');
    expect((await ws.response)[':status']).toBe(403);
    await connection.closed;
    expect(Buffer.concat(connection.after).length).toBe(0);
    ws.done();
  });
});
