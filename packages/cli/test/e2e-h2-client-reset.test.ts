import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import { silent, until } from './support/stack.js';

// An HTTP/2 client whose connection drops halfway through an upload: the backend must see that request cut
// short (aborted), never a complete request with a short body nor one left open, as on HTTP/1.1 when the
// client's socket closes mid-body. (Node's own client cannot be used to reset a stream mid-body here: its
// stream.close() sends END_STREAM before RST_STREAM, so the body did end.)

let backend: Server;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
const seen: { received: number; complete: boolean; aborted: boolean }[] = [];

beforeAll(async () => {
  backend = createServer((req: IncomingMessage, res) => {
    const one = { received: 0, complete: false, aborted: false };
    seen.push(one);
    req.on('data', (chunk: Buffer) => {
      one.received += chunk.length;
    });
    req.on('end', () => {
      one.complete = true;
      res.end('got it');
    });
    req.on('error', () => {});
    res.on('close', () => {
      if (!one.complete) one.aborted = true;
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: edge.url,
    subdomain: 'reset',
  });
});

afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => backend.close(resolve));
});

it('a client gone mid-upload reaches the backend as an aborted request, not a complete one', async () => {
  const session = h2c(port);
  const stream = session.request({
    ':method': 'POST',
    ':path': '/upload',
    ':authority': `reset.localhost:${port}`,
    'content-type': 'application/octet-stream',
  });
  stream.on('error', () => {});
  stream.write(Buffer.alloc(10_000, 1));
  await until(() => seen.length === 1 && seen[0]!.received === 10_000, {
    what: 'the body so far at the backend',
    timeoutMs: 10_000,
  });
  // The client's connection drops (a closed tab, a lost network): no END_STREAM was ever sent.
  session.socket.destroy();
  await until(() => seen[0]!.aborted || seen[0]!.complete, {
    what: 'the backend request to end',
    timeoutMs: 10_000,
  });
  expect(seen[0]).toEqual({ received: 10_000, complete: false, aborted: true });
});
