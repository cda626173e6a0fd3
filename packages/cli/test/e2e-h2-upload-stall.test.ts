import type { ClientHttp2Session, ClientHttp2Stream } from 'node:http2';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { h2c } from './support/h2-client.js';
import { silent, until } from './support/stack.js';

// HTTP/2 uploads into a stalled tunnel: the backend (h2c, reading nothing) holds the agent, the agent's
// tunnel stream gives the edge no credit, and the edge must then hold the client back with HTTP/2's own
// windows. What a client gets onto the wire is what the path holds; the edge's share is at most its stream
// window (256 KiB) per stream, so 100 × 256 KiB per connection (docs/reliability.md, fixed bounds): Node
// hands connection-level credit back as DATA arrives, so the connection window bounds nothing held. Beside
// it: the tunnel's 256 KiB stream window and the backend's own windows.

const KiB = 1024;
const MiB = 1024 * KiB;
const EDGE_STREAM_WINDOW = 256 * KiB;
/** SETTINGS_MAX_CONCURRENT_STREAMS of the edge's HTTP/2. */
const STREAMS = 100;
const TUNNEL_STREAM_WINDOW = 256 * KiB;
/** Per stream past the tunnel: the backend's stream window (Node's 64 KiB) and the agent's stream buffer. */
const PAST_TUNNEL = 128 * KiB;
/** Per connection: the sockets' and sessions' buffers on the way. */
const SLACK = 1 * MiB;

let backend: H2TestBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  backend = await startH2Backend();
  backend.routes.set('/sink', (stream) => stream.pause());
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'stall', h2c: true });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

/**
 * Uploads up to 256 MiB on a new stream as fast as the windows let it; `sent()` counts the bytes node:http2
 * has handed to the connection (a write's callback runs once its DATA went out, within the peer's windows).
 */
function upload(session: ClientHttp2Session): { stream: ClientHttp2Stream; sent: () => number } {
  const stream = session.request({
    ':method': 'POST',
    ':path': '/sink',
    ':authority': `stall.localhost:${port}`,
    'content-type': 'application/octet-stream',
  });
  stream.on('error', () => {});
  let sent = 0;
  let written = 0;
  const chunk = Buffer.alloc(64 * KiB, 3);
  const pump = (): void => {
    while (written < 256 * MiB) {
      written += chunk.length;
      if (!stream.write(chunk, () => (sent += chunk.length))) {
        stream.once('drain', pump);
        return;
      }
    }
  };
  pump();
  return { stream, sent: () => sent };
}

/** Resolves once `count()` has held still across 40 checks: every window on the way is full. */
async function settled(count: () => number): Promise<number> {
  let last = -1;
  let still = 0;
  await until(() => {
    const now = count();
    still = now === last ? still + 1 : 0;
    last = now;
    return still >= 40;
  });
  return last;
}

it('an HTTP/2 upload into a stalled tunnel stops at the edge stream window and the windows after it', async () => {
  const session = h2c(port);
  const { stream, sent } = upload(session);
  const held = await settled(sent);
  console.log(
    `one stalled HTTP/2 upload: ${(held / MiB).toFixed(2)} MiB of 256 MiB offered got onto the wire`,
  );
  expect(held).toBeLessThanOrEqual(EDGE_STREAM_WINDOW + TUNNEL_STREAM_WINDOW + PAST_TUNNEL + SLACK);
  // More than Node's 64 KiB default: the window is the tunnel's.
  expect(held).toBeGreaterThanOrEqual(EDGE_STREAM_WINDOW);
  stream.close();
  session.close();
});

it('stalled HTTP/2 uploads on every stream of one connection stop at a stream window each', async () => {
  const session = h2c(port);
  const uploads = Array.from({ length: STREAMS }, () => upload(session));
  const total = (): number => uploads.reduce((sum, u) => sum + u.sent(), 0);
  const held = await settled(total);
  console.log(
    `${STREAMS} stalled HTTP/2 uploads on one connection: ${(held / MiB).toFixed(2)} MiB got onto the wire`,
  );
  expect(held).toBeLessThanOrEqual(
    STREAMS * (EDGE_STREAM_WINDOW + TUNNEL_STREAM_WINDOW + PAST_TUNNEL) + SLACK,
  );
  for (const { stream } of uploads) stream.close();
  session.close();
});
