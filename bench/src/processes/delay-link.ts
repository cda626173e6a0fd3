import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/*
 * A WAN link on loopback, for `pnpm bench wan`: a TCP proxy that holds every byte for half the round trip in
 * each direction, in order. This machine has no netem, and a round trip is what limits a windowed protocol.
 *
 * It is a link with a buffer, not a bottleneck and not a memory sink: each direction of each connection holds
 * at most `maxBytesInFlight` bytes (what arrived and is not yet written on); beyond that it stops reading
 * (TCP then pushes back on the sender), and it honours the receiving side's backpressure the same way. It
 * measures nothing: the bench measures what crosses it.
 */

export interface DelayLinkOptions {
  /** Where every accepted connection is forwarded (loopback). */
  target: { host: string; port: number };
  /** The round trip the link adds; each direction holds bytes for half of it. */
  rttMs: number;
  /** Bytes one direction of one connection may hold before it stops reading (default 64 MiB). */
  maxBytesInFlight?: number;
}

export interface DelayLink {
  /** The loopback port to connect to instead of the target. */
  readonly port: number;
  /** Bytes the link holds right now, all connections and directions together (for tests of the bound). */
  heldBytes(): number;
  close(): Promise<void>;
}

export const DEFAULT_LINK_BUFFER_BYTES = 64 * 2 ** 20;

interface Held {
  /** null: the sender ended its side; passed on after the same delay as the bytes before it. */
  chunk: Buffer | null;
  dueAt: number;
}

/** One direction of one connection: bytes from `from` reach `to` `delayMs` later, in order. */
function pipeDelayed(from: Socket, to: Socket, delayMs: number, maxBytes: number): () => number {
  const queue: Held[] = [];
  let head = 0;
  let heldBytes = 0;
  let timer: NodeJS.Timeout | undefined;
  let waitingForDrain = false;

  const release = (): void => {
    timer = undefined;
    const now = performance.now();
    while (head < queue.length && !waitingForDrain) {
      const next = queue[head]!;
      if (next.dueAt > now) break;
      head += 1;
      if (next.chunk === null) {
        to.end();
        continue;
      }
      heldBytes -= next.chunk.length;
      // The receiver's buffer is full: keep the rest here (still counted) until it drains.
      if (!to.write(next.chunk)) {
        waitingForDrain = true;
        to.once('drain', () => {
          waitingForDrain = false;
          release();
        });
      }
    }
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head > 1024) {
      queue.splice(0, head);
      head = 0;
    }
    if (from.isPaused() && heldBytes < maxBytes / 2 && !from.destroyed) from.resume();
    schedule();
  };
  const schedule = (): void => {
    if (timer !== undefined || waitingForDrain || head >= queue.length) return;
    timer = setTimeout(release, Math.max(0, queue[head]!.dueAt - performance.now()));
  };

  from.on('data', (chunk: Buffer) => {
    queue.push({ chunk, dueAt: performance.now() + delayMs });
    heldBytes += chunk.length;
    if (heldBytes >= maxBytes) from.pause();
    schedule();
  });
  from.on('end', () => {
    queue.push({ chunk: null, dueAt: performance.now() + delayMs });
    schedule();
  });
  // A reset travels at once: nothing is left to deliver on a connection that failed.
  from.on('error', () => to.destroy());
  from.on('close', () => {
    if (from.errored !== null) to.destroy();
  });
  // Both sockets are half-open capable, so a clean close of `to` means this direction already delivered its
  // end; only a failed `to` cuts the sender off (and drops what was held for it).
  to.on('close', (hadError) => {
    clearTimeout(timer);
    if (!hadError) return;
    queue.length = 0;
    heldBytes = 0;
    from.destroy();
  });
  return () => heldBytes;
}

export async function createDelayLink(options: DelayLinkOptions): Promise<DelayLink> {
  const oneWayMs = options.rttMs / 2;
  const maxBytes = options.maxBytesInFlight ?? DEFAULT_LINK_BUFFER_BYTES;
  if (!(oneWayMs >= 0) || !(maxBytes > 0)) {
    throw new RangeError('a delay link needs rttMs >= 0 and maxBytesInFlight > 0');
  }
  const sockets = new Set<Socket>();
  const directions = new Set<() => number>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server: Server = createServer({ noDelay: true, allowHalfOpen: true }, (near) => {
    const far = connect({
      host: options.target.host,
      port: options.target.port,
      noDelay: true,
      allowHalfOpen: true,
    });
    track(near);
    track(far);
    for (const held of [
      pipeDelayed(near, far, oneWayMs, maxBytes),
      pipeDelayed(far, near, oneWayMs, maxBytes),
    ]) {
      directions.add(held);
      near.once('close', () => directions.delete(held));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    heldBytes: () => [...directions].reduce((sum, held) => sum + held(), 0),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
