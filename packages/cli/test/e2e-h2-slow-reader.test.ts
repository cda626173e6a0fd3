import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import { silent, until } from './support/stack.js';

// An HTTP/2 client that stops reading: its stream's window closes, the edge's writes report a full buffer,
// the tunnel stream's credit is held back (TunnelExchange's `owed`), and the backend is paused. What the
// backend manages to write is bounded by the windows on the way, not by the body's size.

const MiB = 1024 * 1024;
const BODY = 64 * MiB;

let backend: Server;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
let written = 0;

beforeAll(async () => {
  backend = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BODY });
    const chunk = Buffer.alloc(64 * 1024, 7);
    const pump = (): void => {
      while (written < BODY) {
        written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: edge.url,
    subdomain: 'slow',
  });
});

afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => backend.close(resolve));
});

it('a stalled HTTP/2 reader holds the backend back; reading again completes the body', async () => {
  const session = h2c(port);
  const stream = session.request({ ':path': '/big', ':authority': `slow.localhost:${port}` });
  stream.pause();
  await new Promise((resolve) => stream.once('response', resolve));
  // Steady: the backend has written nothing more across a few checks (the windows are full).
  let last = -1;
  let steady = 0;
  await until(() => {
    steady = written === last ? steady + 1 : 0;
    last = written;
    return steady >= 10;
  });
  console.log(
    `backend wrote ${(written / MiB).toFixed(1)} MiB of ${BODY / MiB} MiB while the HTTP/2 reader was stalled`,
  );
  expect(written).toBeLessThan(40 * MiB);
  let received = 0;
  stream.on('data', (chunk: Buffer) => {
    received += chunk.length;
  });
  stream.resume();
  await new Promise((resolve) => stream.once('end', resolve));
  session.close();
  expect(received).toBe(BODY);
});
