import { connect, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { DEFAULT_LEVERS, type RelayLevers, RelayLink, readOptions } from './relay-floor-link.js';

/*
 * One half of the floor relay of `pnpm bench floor`, `tcp` and `bulk`: the least two Node.js processes can
 * do to carry a client's bytes to a backend the way tunnel2 does (many client connections multiplexed over one
 * TCP connection between an edge-like and an agent-like process), with nothing else. No HTTP parsing, no
 * per-stream flow control, no limits, no errors answered: bytes in, an 8-byte header, bytes out, and the
 * simplest bounded backpressure (relay-floor-link.ts) so a GiB moved does not become a GiB held. What this
 * costs is what any Node.js tunnel of this shape pays on the machine before it does any work of its own.
 *
 *   node relay-floor-process.js --role agent --backend <url>   (listens for the one edge connection)
 *   node relay-floor-process.js --role edge --upstream <url>   (listens for clients)
 *
 * Levers (bench/README.md, "TCP floor levers"; the defaults are what `pnpm bench floor` measures):
 *   --no-delay on|off, --coalesce <bytes>, --read-bytes <bytes>, --high-water-mark <bytes>.
 * Each prints `{"event":"listening","url":...}` once ready.
 */

interface SocketOptions {
  highWaterMark?: number;
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

/**
 * Connects to `url`; its bytes go to the handler `handler()` answers when they arrive (the socket must exist
 * before the relay can attach it), through net's `onread` when the read-size lever is set.
 */
function connectTo(
  url: URL,
  levers: RelayLevers,
  sockets: SocketOptions,
  handler: () => (chunk: Buffer) => void,
): Socket {
  const socket = connect({
    port: Number(url.port),
    host: url.hostname,
    ...sockets,
    ...readOptions(levers.readBytes, handler),
  });
  if (levers.readBytes <= 0) socket.on('data', (chunk: Buffer) => handler()(chunk));
  return socket;
}

/** Agent-like: one backend connection per stream, opened on the stream's first bytes. */
function runAgent(backend: URL, levers: RelayLevers, sockets: SocketOptions): void {
  listen(
    createServer(sockets, (link) => {
      const relay: RelayLink = new RelayLink(link, levers, (id) => {
        let onData: (chunk: Buffer) => void = () => {};
        const upstream = connectTo(backend, levers, sockets, () => onData);
        onData = relay.attach(id, upstream);
      });
      link.on('data', relay.onLinkData);
      link.on('error', () => link.destroy());
    }),
  );
}

/** Edge-like: every client connection becomes a stream on the one connection to the agent-like half. */
function runEdge(upstream: URL, levers: RelayLevers, sockets: SocketOptions): void {
  let onLinkData: (chunk: Buffer) => void = () => {};
  const link = connectTo(upstream, levers, sockets, () => onLinkData);
  // The edge opens no stream on the agent's word: a frame for an unknown stream is one already closed here.
  const relay = new RelayLink(link, levers, () => {});
  onLinkData = relay.onLinkData;
  let nextId = 1;
  link.on('error', (err) => {
    process.stderr.write(`relay edge: the link to ${upstream.href} failed: ${err.message}\n`);
    process.exit(1);
  });
  link.once('connect', () =>
    listen(
      createServer(sockets, (client: Socket) => {
        client.on('data', relay.attach(nextId++, client));
      }),
    ),
  );
}

function byteCount(flag: string, text: string | undefined): number {
  if (text === undefined) return 0;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${flag} ${text}: expected bytes ≥ 0`);
  return value;
}

const { values } = parseArgs({
  options: {
    role: { type: 'string' },
    backend: { type: 'string' },
    upstream: { type: 'string' },
    'no-delay': { type: 'string' },
    coalesce: { type: 'string' },
    'read-bytes': { type: 'string' },
    'high-water-mark': { type: 'string' },
  },
});
const levers: RelayLevers = {
  noDelay: values['no-delay'] === undefined ? DEFAULT_LEVERS.noDelay : values['no-delay'] === 'on',
  coalesceBytes: byteCount('coalesce', values.coalesce),
  readBytes: byteCount('read-bytes', values['read-bytes']),
};
const highWaterMark = byteCount('high-water-mark', values['high-water-mark']);
const sockets: SocketOptions = highWaterMark > 0 ? { highWaterMark } : {};
if (values.role === 'agent' && values.backend !== undefined && URL.canParse(values.backend)) {
  runAgent(new URL(values.backend), levers, sockets);
} else if (values.role === 'edge' && values.upstream !== undefined && URL.canParse(values.upstream)) {
  runEdge(new URL(values.upstream), levers, sockets);
} else {
  process.stderr.write(
    'usage: relay-floor-process --role agent --backend <url> | --role edge --upstream <url> ' +
      '[--no-delay on|off] [--coalesce <bytes>] [--read-bytes <bytes>] [--high-water-mark <bytes>]\n',
  );
  process.exit(2);
}
