import { createServer, type Socket } from 'node:net';

export interface RawRequest {
  method: string;
  path: string;
  /** 1 for the first request on its connection, 2 for the second, ... */
  onConnection: number;
  /** Which connection (1-based, in accept order) it arrived on. */
  connection: number;
}

export interface RawBackend {
  port: number;
  /** Every request head received, in order. */
  received: RawRequest[];
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/**
 * A backend on a bare TCP socket, for faults a well-behaved HTTP server cannot produce: it hands each
 * request head to `answer`, which writes whatever bytes it likes (or none) and may destroy the socket.
 * Request bodies are skipped by their Content-Length; heads are split on the blank line (test-only parsing).
 */
export async function startRawBackend(
  answer: (socket: Socket, request: RawRequest) => void,
): Promise<RawBackend> {
  const received: RawRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const connection = ++connections;
    let onConnection = 0;
    let buffered = Buffer.alloc(0);
    let skip = 0;
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (skip > 0) {
          const n = Math.min(skip, buffered.length);
          skip -= n;
          buffered = buffered.subarray(n);
          if (skip > 0) return;
        }
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buffered.subarray(0, end).toString('latin1');
        buffered = buffered.subarray(end + 4);
        const [method = '', path = ''] = head.split(' ');
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        skip = length ? Number(length[1]) : 0;
        const request = { method, path, onConnection: ++onConnection, connection };
        received.push(request);
        answer(socket, request);
        if (socket.destroyed) return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    received,
    get connections() {
      return connections;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A small complete keep-alive response. */
export function okResponse(body = 'ok'): string {
  return `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: keep-alive\r\n\r\n${body}`;
}
