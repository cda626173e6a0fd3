import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { bridgeSocket, ErrorCode, type MuxStream, REFUSAL_REPLAY_BYTES } from '../src/index.js';
import { connectPair, type Pair } from './support/mux-harness.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/** A loopback server that hashes what it reads; resolves with the client socket connected to it. */
async function sink(): Promise<{ socket: Socket; received: Promise<{ bytes: number; sha256: string }> }> {
  let resolveReceived: (value: { bytes: number; sha256: string }) => void = () => {};
  const received = new Promise<{ bytes: number; sha256: string }>((resolve) => (resolveReceived = resolve));
  const server: Server = createServer((peer) => {
    const hash = createHash('sha256');
    let bytes = 0;
    peer.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      hash.update(chunk);
    });
    peer.on('end', () => {
      resolveReceived({ bytes, sha256: hash.digest('hex') });
      peer.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  const socket = tcpConnect(port, '127.0.0.1');
  await once(socket, 'connect');
  cleanups.push(() => {
    socket.destroy();
    server.close();
  });
  return { socket, received };
}

/** Counts the writes that reach `socket`'s system calls (one per _write or _writev). */
function countWrites(socket: Socket): () => number {
  const counted = socket as Socket & { _writev: Socket['_writev']; _write: Socket['_write'] };
  let writes = 0;
  const writev = counted._writev?.bind(counted);
  const write = counted._write.bind(counted);
  counted._writev = (chunks, cb) => {
    writes++;
    writev?.(chunks, cb);
  };
  counted._write = (chunk, encoding, cb) => {
    writes++;
    write(chunk, encoding, cb);
  };
  return () => writes;
}

describe('bridgeSocket', () => {
  it('writes the pieces of one received message to its socket at once, and every byte arrives', async () => {
    // Messages arrive in 4 KiB pieces (ws fragments as views): a 64 KiB DATA payload reaches the stream as
    // 16 pieces within one receive. Uncorked, each piece would be a write of its own.
    const pair: Pair = await connectPair({
      pieceSize: 4 * 1024,
      settings: { maxFrameSize: 64 * 1024, initialStreamWindow: 1024 * 1024 },
    });
    cleanups.push(() => pair.dispose());
    const { socket, received } = await sink();
    const writes = countWrites(socket);
    const closed = new Promise<void>((resolve) => {
      pair.agent.events.onStreamOpened = (stream: MuxStream) => {
        bridgeSocket(stream, socket, { socketResetCode: () => 0, onClose: () => resolve() });
      };
    });
    const body = randomBytes(8 * 64 * 1024);
    const stream = pair.edge.session.openStream();
    stream.sendHeaders(Buffer.alloc(0), false);
    for (let offset = 0; offset < body.length; offset += 64 * 1024)
      stream.write(body.subarray(offset, offset + 64 * 1024));
    stream.end();
    const got = await received;
    expect(got.bytes).toBe(body.length);
    expect(got.sha256).toBe(createHash('sha256').update(body).digest('hex'));
    // 8 payloads of 64 KiB in 128 pieces: a write per received message, not per piece.
    expect(writes()).toBeGreaterThan(0);
    expect(writes()).toBeLessThanOrEqual(16);
    await closed;
  });
});

describe('bridgeSocket, a stream refused before its peer took it', () => {
  it('carries the connection on the stream `refused` gives, the bytes sent so far replayed', async () => {
    const pair: Pair = await connectPair();
    cleanups.push(() => pair.dispose());
    // The agent refuses the first stream (its GOAWAY on the way) and echoes on every later one.
    let seen = 0;
    pair.agent.events.onStreamOpened = (stream: MuxStream) => {
      const first = seen++ === 0;
      stream.handler = {
        onHeaders: () => {
          if (first) stream.reset(ErrorCode.REFUSED_STREAM);
        },
        onData: (chunk) => {
          stream.consume(chunk.length);
          if (!first) stream.write(Buffer.from(chunk));
        },
        onEnd: () => stream.end(),
        onReset: () => {},
        onDrain: () => {},
      };
    };
    const open = (): MuxStream => {
      const stream = pair.edge.session.openStream();
      stream.sendHeaders(Buffer.alloc(0), false);
      return stream;
    };
    const server = createServer((publicSide) => {
      bridgeSocket(open(), publicSide, { socketResetCode: () => 0, onClose: () => {}, refused: open });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = tcpConnect((server.address() as { port: number }).port, '127.0.0.1');
    cleanups.push(() => {
      client.destroy();
      server.close();
    });
    client.write('hello before the refusal');
    let echoed = '';
    await new Promise<void>((resolve, reject) => {
      client.on('data', (chunk: Buffer) => {
        echoed += chunk.toString();
        if (echoed === 'hello before the refusal') resolve();
      });
      client.once('error', reject);
    });
    expect(seen).toBe(2);
  });

  it('past REFUSAL_REPLAY_BYTES from the client nothing is replayed: the refusal resets the client', async () => {
    const pair: Pair = await connectPair();
    cleanups.push(() => pair.dispose());
    // The agent reads past the replay bound, then refuses (as a hostile or confused one might).
    let received = 0;
    pair.agent.events.onStreamOpened = (stream: MuxStream) => {
      stream.handler = {
        onHeaders: () => {},
        onData: (chunk) => {
          received += chunk.length;
          if (received > REFUSAL_REPLAY_BYTES) stream.reset(ErrorCode.REFUSED_STREAM);
        },
        onEnd: () => {},
        onReset: () => {},
        onDrain: () => {},
      };
    };
    let asked = 0;
    const server = createServer((publicSide) => {
      const stream = pair.edge.session.openStream();
      stream.sendHeaders(Buffer.alloc(0), false);
      bridgeSocket(stream, publicSide, {
        socketResetCode: () => 0,
        onClose: () => {},
        refused: () => {
          asked++;
          return undefined;
        },
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = tcpConnect((server.address() as { port: number }).port, '127.0.0.1');
    cleanups.push(() => {
      client.destroy();
      server.close();
    });
    const reset = new Promise<string | undefined>((resolve) => {
      client.on('error', (err: NodeJS.ErrnoException) => resolve(err.code));
      client.on('close', () => resolve(undefined));
    });
    client.write(randomBytes(REFUSAL_REPLAY_BYTES + 16 * 1024));
    expect(await reset).toBe('ECONNRESET');
    expect(received).toBeGreaterThan(REFUSAL_REPLAY_BYTES);
    expect(asked).toBe(0);
  });
});
