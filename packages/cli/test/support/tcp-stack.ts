import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { connectTcp, type TcpConnectOptions, type Tunnel } from '../../src/index.js';
import { silent } from './stack.js';

/**
 * A range of ports for the edge's TCP tunnels. Ports another process holds are skipped by the edge's
 * allocator, so the range need not be free, only mostly.
 */
export function portRange(size = 32): string {
  const first = 20_000 + Math.floor(Math.random() * 10_000);
  return `${first}-${first + size - 1}`;
}

/** A TCP server that hashes what each connection sends and, at the client's FIN, answers with the hex digest. */
export async function startHashServer(): Promise<{ port: number; server: Server; close(): Promise<void> }> {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    const hash = createHash('sha256');
    socket.on('data', (chunk: Buffer) => hash.update(chunk));
    socket.on('end', () => socket.end(hash.digest('hex')));
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    server,
    close: async () => {
      server.close();
      await once(server, 'close');
    },
  };
}

/** An echo server: every byte comes back, and its FIN is answered with a FIN. */
export async function startEchoServer(): Promise<{ port: number; server: Server }> {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as { port: number }).port, server };
}

/** A TCP server that only holds its connections: `latest` is the last one accepted. */
export async function startHoldingServer(): Promise<{
  port: number;
  latest(): Socket | undefined;
  forget(): void;
  close(): Promise<void>;
}> {
  let latest: Socket | undefined;
  const server = createServer((socket) => {
    latest = socket;
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    latest: () => latest,
    forget: () => {
      latest = undefined;
    },
    close: async () => {
      server.close();
    },
  };
}

export interface TcpStack {
  edge: Edge;
  tunnel: Tunnel;
  /** The tunnel's public port on 127.0.0.1. */
  port: number;
  close(): Promise<void>;
}

/** A real edge with a TCP range and a real agent's TCP tunnel to `target`. */
export async function startTcpStack(
  target: number | string,
  options: { edge?: EdgeOptions; tunnel?: Partial<TcpConnectOptions> } = {},
): Promise<TcpStack> {
  const edge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange(), ...options.edge });
  await edge.listen();
  const tunnel = await connectTcp({ target, server: edge.url, ...options.tunnel });
  const port = tunnel.info?.tcp?.port ?? 0;
  return {
    edge,
    tunnel,
    port,
    async close() {
      await tunnel.close(0);
      await edge.close(0);
    },
  };
}

/** Connects to the public port, sends `bytes` in chunks honouring backpressure, half-closes, and reads the answer. */
/** `host`: which address of the edge (a cluster test's nodes each have their own loopback address). */
export async function sendAndHash(
  port: number,
  bytes: number,
  host = '127.0.0.1',
): Promise<{ sent: string; answer: string }> {
  const socket = netConnect({ port, host, allowHalfOpen: true });
  await once(socket, 'connect');
  const hash = createHash('sha256');
  const answer: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => answer.push(chunk));
  const ended = once(socket, 'end');
  const chunk = 256 * 1024;
  for (let sent = 0; sent < bytes; sent += chunk) {
    const part = randomBytes(Math.min(chunk, bytes - sent));
    hash.update(part);
    if (!socket.write(part)) await once(socket, 'drain');
  }
  socket.end();
  await ended;
  socket.destroy();
  return { sent: hash.digest('hex'), answer: Buffer.concat(answer).toString() };
}

/** Resolves with how the socket ended: `end` (a FIN), or the error code (ECONNRESET for an RST). */
export function howItEnds(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.on('data', () => {});
    socket.once('end', () => resolve('end'));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}
