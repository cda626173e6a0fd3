import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createDelayLink, type DelayLink } from '../src/processes/delay-link.js';

// The WAN link of `pnpm bench wan`: delays each direction, keeps order and every byte, holds a bounded amount.

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function listen(onSocket: (socket: Socket) => void): Promise<number> {
  const server: Server = createServer(onSocket);
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as AddressInfo).port;
}

async function link(port: number, rttMs: number, maxBytesInFlight?: number): Promise<DelayLink> {
  const created = await createDelayLink({
    target: { host: '127.0.0.1', port },
    rttMs,
    ...(maxBytesInFlight === undefined ? {} : { maxBytesInFlight }),
  });
  cleanup.push(() => created.close());
  return created;
}

/** Distinct bytes per chunk, so a reordered, lost or duplicated chunk changes the hash. */
function chunkOf(i: number, size: number): Buffer {
  const chunk = Buffer.alloc(size);
  for (let j = 0; j < size; j += 4) chunk.writeUInt32LE((i * 2654435761 + j) >>> 0, j);
  return chunk;
}

describe('delay link', () => {
  it('adds its round trip to an exchange (half each way) and carries an echo intact', async () => {
    const port = await listen((s) => s.pipe(s));
    const { port: linkPort } = await link(port, 60);
    const client = connect(linkPort, '127.0.0.1');
    await once(client, 'connect');
    const started = performance.now();
    client.write('ping');
    const [reply] = (await once(client, 'data')) as [Buffer];
    // Only a lower bound: the link must hold bytes at least this long; how much longer is the machine's noise.
    expect(performance.now() - started).toBeGreaterThanOrEqual(59);
    expect(reply.toString()).toBe('ping');
    client.destroy();
  });

  it('keeps order and every byte of a large transfer, and passes the end on', async () => {
    const received = createHash('sha256');
    let bytes = 0;
    let ended!: () => void;
    const done = new Promise<void>((resolve) => {
      ended = resolve;
    });
    const port = await listen((s) => {
      s.on('data', (c: Buffer) => {
        received.update(c);
        bytes += c.length;
      });
      s.on('end', () => {
        s.end();
        ended();
      });
    });
    const { port: linkPort } = await link(port, 10);
    const client = connect(linkPort, '127.0.0.1');
    const sent = createHash('sha256');
    for (let i = 0; i < 128; i++) {
      const chunk = chunkOf(i, 64 * 1024);
      sent.update(chunk);
      if (!client.write(chunk)) await once(client, 'drain');
    }
    client.end();
    await done;
    expect(bytes).toBe(128 * 64 * 1024);
    expect(received.digest('hex')).toBe(sent.digest('hex'));
    client.destroy();
  });

  it('holds at most its buffer when the receiver does not read, then delivers everything once it does', async () => {
    let accept!: (socket: Socket) => void;
    const accepted = new Promise<Socket>((resolve) => {
      accept = resolve;
    });
    const port = await listen((s) => {
      s.pause();
      accept(s);
    });
    const bound = 1024 * 1024;
    const delay = await link(port, 2, bound);
    const client = connect(delay.port, '127.0.0.1');
    const total = 48 * 1024 * 1024;
    const sent = createHash('sha256');
    let written = 0;
    const writer = (async () => {
      for (let i = 0; written < total; i++) {
        const chunk = chunkOf(i, 256 * 1024);
        sent.update(chunk);
        written += chunk.length;
        if (!client.write(chunk)) await once(client, 'drain');
      }
      client.end();
    })();
    const receiver = await accepted;
    // Bounded in count and time: 40 looks 25 ms apart while the sender pushes more than the kernel buffers hold.
    let maxHeld = 0;
    for (let i = 0; i < 40; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      maxHeld = Math.max(maxHeld, delay.heldBytes());
    }
    // One read past the bound is possible (the pause comes after the chunk that crossed it).
    expect(maxHeld).toBeLessThanOrEqual(bound + 256 * 1024);
    expect(written).toBeLessThan(total);

    const received = createHash('sha256');
    let bytes = 0;
    receiver.on('data', (c: Buffer) => {
      received.update(c);
      bytes += c.length;
    });
    receiver.resume();
    await Promise.all([writer, once(receiver, 'end')]);
    expect(bytes).toBe(total);
    expect(received.digest('hex')).toBe(sent.digest('hex'));
    client.destroy();
  });
});
