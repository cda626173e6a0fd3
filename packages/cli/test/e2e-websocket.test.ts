import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { send, sha256 } from './support/http-client.js';
import { silent } from './support/stack.js';
import { startWsBackend, type WsBackend } from './support/ws-backend.js';

let backend: WsBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
const host = () => `ws.localhost:${port}`;

beforeAll(async () => {
  backend = await startWsBackend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'ws' });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

function open(path: string, options: WebSocket.ClientOptions = {}): WebSocket {
  return new WebSocket(`ws://127.0.0.1:${port}${path}`, {
    headers: { host: host() },
    perMessageDeflate: false,
    maxPayload: 256 * 1024 * 1024,
    ...options,
  });
}

describe('WebSocket passthrough', () => {
  it('carries text, binary, fragmented messages and pings both ways', async () => {
    const ws = open('/echo');
    await once(ws, 'open');
    const received: { data: string; binary: boolean }[] = [];
    ws.on('message', (data, isBinary) =>
      received.push({ data: (data as Buffer).toString('hex'), binary: isBinary }),
    );
    ws.send('hello text');
    ws.send(Buffer.from([0, 1, 2, 255]));
    // One message in three fragments.
    ws.send('frag-', { fin: false });
    ws.send('men-', { fin: false });
    ws.send('ted', { fin: true });
    ws.ping('are you there');
    const [pong] = await once(ws, 'pong');
    expect((pong as Buffer).toString()).toBe('are you there');
    while (received.length < 3) await once(ws, 'message');
    expect(received).toEqual([
      { data: Buffer.from('hello text').toString('hex'), binary: false },
      { data: '000102ff', binary: true },
      { data: Buffer.from('frag-men-ted').toString('hex'), binary: false },
    ]);
    ws.close(1000, 'done');
    const [code, reason] = await once(ws, 'close');
    expect(code).toBe(1000);
    expect((reason as Buffer).toString()).toBe('done');
  });

  it("relays the backend's close code and reason", async () => {
    const ws = open('/close');
    await once(ws, 'open');
    ws.send('bye?');
    const [code, reason] = await once(ws, 'close');
    expect(code).toBe(4001);
    expect((reason as Buffer).toString()).toBe('backend says bye');
  });

  it("relays a refusal with the backend's status and body", async () => {
    const ws = open('/forbidden');
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(403);
    let body = '';
    for await (const chunk of res) body += String(chunk);
    expect(body).toBe('not allowed!\r\n');
  });

  it('200 concurrent WebSockets over one session each echo 1,000 messages in order', async () => {
    const sockets = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const ws = open(`/echo?n=${i}`);
        await once(ws, 'open');
        return ws;
      }),
    );
    await Promise.all(
      sockets.map(
        (ws, i) =>
          new Promise<void>((resolve, reject) => {
            let next = 0;
            ws.on('message', (data) => {
              const expected = `${i}:${next}`;
              if (String(data) !== expected)
                reject(new Error(`socket ${i}: got ${String(data)}, expected ${expected}`));
              next++;
              if (next === 1000) resolve();
            });
            for (let m = 0; m < 1000; m++) ws.send(`${i}:${m}`);
          }),
      ),
    );
    for (const ws of sockets) ws.close();
  });

  it('carries a 100 MiB binary message intact', async () => {
    const ws = open('/echo');
    await once(ws, 'open');
    const data = randomBytes(100 * 1024 * 1024);
    ws.send(data);
    const [echo] = await once(ws, 'message');
    expect(sha256(echo as Buffer)).toBe(sha256(data));
    ws.close();
  }, 120_000);

  it('closing the client closes the backend side', async () => {
    const ws = open('/echo');
    await once(ws, 'open');
    const [backendSocket] = backend.wss.clients.size > 0 ? [[...backend.wss.clients].at(-1)!] : [];
    expect(backendSocket).toBeDefined();
    const closed = once(backendSocket!, 'close');
    ws.terminate();
    await closed;
  });

  it('an upgrade that is not WebSocket is served as a plain request, never a 101', async () => {
    const res = await send({
      port,
      path: '/plain',
      headers: [
        'Host',
        host(),
        'Connection',
        'Upgrade, HTTP2-Settings',
        'Upgrade',
        'h2c',
        'HTTP2-Settings',
        'AAMAAABkAARAAAAAAAIAAAAA',
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('plain GET /plain upgrade=none');
  });

  it('a WebSocket to an unknown tunnel gets a 404 naming it', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { host: `nobody.localhost:${port}` } });
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    res.resume();
  });
});
