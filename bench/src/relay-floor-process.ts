import { connect, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';

/*
 * One half of the floor relay of `pnpm bench floor`: the least two Node.js processes can do to carry HTTP
 * between a client and a backend the way tunnel2 does (many client connections multiplexed over one TCP
 * connection between an edge-like and an agent-like process), with nothing else. No HTTP parsing, no flow
 * control, no limits, no errors answered: bytes in, an 8-byte header, bytes out. What this costs per
 * request is what any Node.js tunnel of this shape pays on the machine before it does any work of its own.
 *
 *   node relay-floor-process.js --role agent --backend <url>   (listens for the one edge connection)
 *   node relay-floor-process.js --role edge --upstream <url>   (listens for clients)
 *
 * Frames: stream id (u32) and length (u32), then the bytes; a length of 0xffffffff closes the stream.
 * Each prints `{"event":"listening","url":...}` once ready.
 */

const HEADER_BYTES = 8;
const CLOSE = 0xffffffff;

function header(id: number, length: number): Buffer {
  const head = Buffer.allocUnsafe(HEADER_BYTES);
  head.writeUInt32BE(id, 0);
  head.writeUInt32BE(length, 4);
  return head;
}

/** Sends one frame on the shared connection: one writev for header and payload. */
function sendFrame(link: Socket, id: number, payload: Buffer | null): void {
  link.cork();
  link.write(header(id, payload === null ? CLOSE : payload.length));
  if (payload !== null) link.write(payload);
  link.uncork();
}

/** Splits the shared connection's bytes into frames; keeps a partial frame until the rest arrives. */
function onFrames(link: Socket, handle: (id: number, payload: Buffer | null) => void): void {
  let pending: Buffer | null = null;
  link.on('data', (chunk: Buffer) => {
    const buffer = pending === null ? chunk : Buffer.concat([pending, chunk]);
    let offset = 0;
    while (buffer.length - offset >= HEADER_BYTES) {
      const id = buffer.readUInt32BE(offset);
      const length = buffer.readUInt32BE(offset + 4);
      if (length === CLOSE) {
        handle(id, null);
        offset += HEADER_BYTES;
        continue;
      }
      if (buffer.length - offset - HEADER_BYTES < length) break;
      handle(id, buffer.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + length));
      offset += HEADER_BYTES + length;
    }
    pending = offset < buffer.length ? buffer.subarray(offset) : null;
  });
}

function announce(port: number): void {
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
}

function listen(server: ReturnType<typeof createServer>): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (address !== null && typeof address === 'object') announce(address.port);
  });
}

/** Agent-like: one backend connection per stream, opened on the stream's first bytes. */
function runAgent(backend: URL): void {
  listen(
    createServer((link) => {
      link.setNoDelay(true);
      const streams = new Map<number, Socket>();
      onFrames(link, (id, payload) => {
        let upstream = streams.get(id);
        if (payload === null) {
          upstream?.end();
          streams.delete(id);
          return;
        }
        if (upstream === undefined) {
          const opened = connect(Number(backend.port), backend.hostname);
          opened.setNoDelay(true);
          opened.on('data', (chunk: Buffer) => sendFrame(link, id, chunk));
          opened.on('close', () => {
            if (streams.delete(id)) sendFrame(link, id, null);
          });
          opened.on('error', () => opened.destroy());
          streams.set(id, opened);
          upstream = opened;
        }
        upstream.write(payload);
      });
      link.on('error', () => link.destroy());
      link.on('close', () => {
        for (const upstream of streams.values()) upstream.destroy();
        streams.clear();
      });
    }),
  );
}

/** Edge-like: every client connection becomes a stream on the one connection to the agent-like half. */
function runEdge(upstream: URL): void {
  const link = connect(Number(upstream.port), upstream.hostname);
  link.setNoDelay(true);
  const clients = new Map<number, Socket>();
  let nextId = 1;
  onFrames(link, (id, payload) => {
    const client = clients.get(id);
    if (payload === null) {
      clients.delete(id);
      client?.end();
    } else client?.write(payload);
  });
  link.on('error', (err) => {
    process.stderr.write(`relay edge: the link to ${upstream.href} failed: ${err.message}\n`);
    process.exit(1);
  });
  link.once('connect', () =>
    listen(
      createServer((client) => {
        client.setNoDelay(true);
        const id = nextId++;
        clients.set(id, client);
        client.on('data', (chunk: Buffer) => sendFrame(link, id, chunk));
        client.on('close', () => {
          if (clients.delete(id)) sendFrame(link, id, null);
        });
        client.on('error', () => client.destroy());
      }),
    ),
  );
}

const { values } = parseArgs({
  options: { role: { type: 'string' }, backend: { type: 'string' }, upstream: { type: 'string' } },
});
if (values.role === 'agent' && values.backend !== undefined && URL.canParse(values.backend)) {
  runAgent(new URL(values.backend));
} else if (values.role === 'edge' && values.upstream !== undefined && URL.canParse(values.upstream)) {
  runEdge(new URL(values.upstream));
} else {
  process.stderr.write(
    'usage: relay-floor-process --role agent --backend <url> | --role edge --upstream <url>\n',
  );
  process.exit(2);
}
