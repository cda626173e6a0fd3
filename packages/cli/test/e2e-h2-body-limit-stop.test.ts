import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import { silent } from './support/stack.js';

// A body past maxRequestBodyBytes on HTTP/2: after its 413 the edge must stop the upload (RST_STREAM
// NO_ERROR after the complete response, RFC 9113 §8.1), as HTTP/1.1 closes the connection, rather than
// read and throw away whatever the client keeps sending: the limit bounds what the edge reads, not only
// what it forwards.

const MiB = 1024 * 1024;

let backend: Server;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  backend = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('read it all'));
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  edge = buildEdge({ port: 0, logger: silent, maxRequestBodyBytes: 1000 });
  ({ port } = await edge.listen());
  tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: edge.url,
    subdomain: 'limit',
  });
});

afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => backend.close(resolve));
});

it('a streamed body past the limit: 413, then the upload is stopped, not read on and discarded', async () => {
  const session = h2c(port);
  const stream = session.request({
    ':method': 'POST',
    ':path': '/upload',
    ':authority': `limit.localhost:${port}`,
  });
  stream.on('error', () => {});
  let status = 0;
  stream.on('response', (headers) => {
    status = Number(headers[':status']);
  });
  stream.resume();
  const chunk = Buffer.alloc(16 * 1024, 1);
  let written = 0;
  const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
  let open = true;
  void closed.then(() => {
    open = false;
  });
  while (open && written < 64 * MiB) {
    written += chunk.length;
    if (!stream.write(chunk)) await Promise.race([new Promise((r) => stream.once('drain', r)), closed]);
  }
  if (open) stream.end();
  await closed;
  session.close();
  expect(status).toBe(413);
  // The stream window (256 KiB) and what was in flight when the 413 left: far below what was offered.
  expect(written).toBeLessThan(8 * MiB);
});
