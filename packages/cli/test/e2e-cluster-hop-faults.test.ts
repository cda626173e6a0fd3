import { once } from 'node:events';
import { request } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import type { Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { until } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/**
 * A peer whose public port accepts TCP and never says a word: a TLS hop to it never connects, so the
 * upgrade waits in its connect phase for as long as the test likes.
 */
describe('an upgrade forwarded to a peer that never connects', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let silentPeer: Server;
  const accepted: Socket[] = [];
  let backend: Backend;
  let tunnel: Tunnel;

  beforeAll(async () => {
    silentPeer = createServer((socket) => {
      accepted.push(socket);
      socket.resume();
    });
    silentPeer.listen(0, '127.0.0.1');
    await once(silentPeer, 'listening');
    const { port } = silentPeer.address() as { port: number };
    ({ a, b, portA } = await twoNodes({
      // Far beyond the test: only the client's leaving can end the connect phase.
      a: { cluster: { connectTimeoutMs: 60_000 } },
      b: { cluster: { nodeUrl: `https://127.0.0.1:${port}/` } },
    }));
    backend = await createTestBackend();
    tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
  });

  afterAll(async () => {
    await tunnel?.close(0);
    await b?.close(0);
    await a?.close(0);
    for (const socket of accepted) socket.destroy();
    silentPeer.close();
    await backend?.close();
  });

  it('finishes the in-flight count and drops the peer connection when the client leaves first', async () => {
    const req = request({
      host: '127.0.0.1',
      port: portA,
      path: '/ws',
      agent: false,
      headers: {
        host: 'shop.localhost',
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      },
    });
    req.on('error', () => {});
    req.end();
    await until(() => accepted.length === 1);
    expect(a.inFlight).toBe(1);
    const peerSide = accepted[0]!;
    const peerClosed = once(peerSide, 'close');
    req.destroy();
    // Without a finish, a draining node A would wait its whole grace for this upgrade.
    await until(() => a.inFlight === 0);
    await peerClosed;
    expect(a.cluster?.counters.forwarded.ok).toBe(0);
  });
});
