import { createHash } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';

/** One connection the backend accepted: its upgrade request's head, then every byte after it. */
export interface HeldConnection {
  /** The request line and fields, as latin1 (test-only parsing). */
  head: string;
  path: string;
  socket: Socket;
  /** Bytes after the head, in arrival order. */
  readonly after: Buffer[];
  /** Resolves once `after` holds at least `bytes` bytes, with them all. */
  received(bytes: number): Promise<Buffer>;
  /** Resolves when the agent ended its side (FIN). */
  ended: Promise<void>;
  /** Resolves when the connection is gone (the agent closed or destroyed it). */
  closed: Promise<void>;
  /** Writes a 101 with the Sec-WebSocket-Accept that answers the request's key. */
  accept(): void;
}

export interface HeldUpgradeBackend {
  port: number;
  /** Resolves with the next connection whose upgrade head has arrived. */
  next(): Promise<HeldConnection>;
  close(): Promise<void>;
}

/**
 * A backend on a bare TCP socket that answers an upgrade only when the test says so (`accept()`, or a
 * refusal written on `socket`), or never: what a slow or hung WebSocket server looks like to the agent.
 * It records every byte that follows the request head, before and after its answer.
 */
export async function startHeldUpgradeBackend(): Promise<HeldUpgradeBackend> {
  const sockets = new Set<Socket>();
  const arrived: HeldConnection[] = [];
  let waiting: ((connection: HeldConnection) => void) | undefined;
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
    void closed.then(() => sockets.delete(socket));
    let buffered = Buffer.alloc(0);
    let connection: HeldConnection | undefined;
    let onBytes: (() => void) | undefined;
    /** Bytes in `after`, counted as they come (a concat per chunk would be quadratic). */
    let length = 0;
    socket.on('data', (chunk: Buffer) => {
      if (connection !== undefined) {
        connection.after.push(chunk);
        length += chunk.length;
        onBytes?.();
        return;
      }
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const after: Buffer[] = [];
      const rest = buffered.subarray(end + 4);
      if (rest.length > 0) after.push(rest);
      length = rest.length;
      const key = /\r\nsec-websocket-key:\s*(\S+)/i.exec(head)?.[1] ?? '';
      connection = {
        head,
        path: head.split(' ')[1] ?? '',
        socket,
        after,
        ended,
        closed,
        received: (bytes) =>
          new Promise<Buffer>((resolve) => {
            const check = (): void => {
              if (length < bytes) return;
              onBytes = undefined;
              resolve(Buffer.concat(after));
            };
            onBytes = check;
            check();
          }),
        accept: () => {
          const accept = createHash('sha1')
            .update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
            .digest('base64');
          socket.write(
            `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
          );
        },
      };
      if (waiting !== undefined) {
        const resolve = waiting;
        waiting = undefined;
        resolve(connection);
      } else arrived.push(connection);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    next: () => {
      const ready = arrived.shift();
      if (ready !== undefined) return Promise.resolve(ready);
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
