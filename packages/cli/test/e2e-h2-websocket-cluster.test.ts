import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type ClientHttp2Session, constants } from 'node:http2';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import { twoNodes } from './support/two-nodes.js';
import { clientClose, clientFrame, FrameReader, OPCODE } from './support/ws-frames.js';

// An RFC 8441 WebSocket arriving at a node whose agent is on another node: carried over the HTTP hop as the
// HTTP/1.1 upgrade an HTTP/1.1 client's would be (signed, handled there as a local one), its 101 made the
// stream's :status 200 by the ingress node. A cluster announces RFC 8441 as one node does.

let backend: Server;
let a: Edge;
let b: Edge;
let portA: number;
let tunnel: Tunnel;
/** The close codes the backend saw, in order. */
const closes: number[] = [];
let onClose: (() => void) | undefined;
let lastHeaders: IncomingHttpHeaders = {};
const RESPONSE_TIMEOUT_MS = 1_000;
/** The /silent upgrades' sockets: never answered, closed at the end (the backend's close waits for them). */
const silent: Duplex[] = [];

beforeAll(async () => {
  backend = createServer((_req, res) => res.end('plain'));
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  backend.on('upgrade', (req, socket, head) => {
    // Accepted, never answered: the owner answers 504 at its response timeout.
    if (req.url === '/silent') {
      silent.push(socket);
      return;
    }
    if (req.url === '/ignores-upgrade') {
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n<p>a page</p>');
      return;
    }
    if (req.url === '/forbidden') {
      socket.end(
        'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nnot allowed!',
      );
      return;
    }
    lastHeaders = req.headers;
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      ws.once('close', (code) => {
        closes.push(code);
        onClose?.();
      });
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  // Short response timeouts, so that a backend that never answers the upgrade is answered soon.
  ({ a, b, portA } = await twoNodes({
    a: { responseTimeoutMs: RESPONSE_TIMEOUT_MS },
    b: { responseTimeoutMs: RESPONSE_TIMEOUT_MS },
  }));
  tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: b.url,
    subdomain: 'chat',
  });
});

afterAll(async () => {
  await tunnel.close(0);
  await a.close(0);
  await b.close(0);
  for (const socket of silent) socket.destroy();
  backend.closeAllConnections();
  await new Promise((resolve) => backend.close(resolve));
});

async function session(): Promise<ClientHttp2Session> {
  const s = h2c(portA);
  await new Promise((resolve) => s.once('remoteSettings', resolve));
  return s;
}

function nextClose(): Promise<number> {
  const count = closes.length;
  return new Promise((resolve) => {
    onClose = () => {
      if (closes.length > count) resolve(closes[count]!);
    };
  });
}

describe('RFC 8441 WebSockets across nodes', () => {
  it('carries messages both ways through the node holding the agent; either side closes the other', async () => {
    const s = await session();
    expect(s.remoteSettings.enableConnectProtocol).toBe(true);
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/echo',
      ':authority': `chat.localhost:${portA}`,
      'sec-websocket-version': '13',
      'sec-websocket-protocol': 'chat',
    });
    stream.on('error', () => {});
    const frames = new FrameReader();
    stream.on('data', (chunk: Buffer) => frames.push(chunk));
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    expect(head[':status']).toBe(200);
    expect(head['sec-websocket-protocol']).toBe('chat');
    expect(head['sec-websocket-accept']).toBeUndefined();
    expect(lastHeaders['x-forwarded-host']).toBe(`chat.localhost:${portA}`);
    expect(lastHeaders['x-forwarded-for']).toMatch(/127\.0\.0\.1/);

    stream.write(clientFrame(OPCODE.text, 'hello across nodes'));
    const [echo] = await frames.next(1);
    expect(echo!.payload.toString()).toBe('hello across nodes');
    const closed = nextClose();
    const ended = new Promise((resolve) => stream.once('end', resolve));
    stream.end(clientClose(1000));
    expect(await closed).toBe(1000);
    await ended;

    // A client that resets its stream: the backend's socket closes.
    const second = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/echo',
      ':authority': `chat.localhost:${portA}`,
      'sec-websocket-version': '13',
    });
    second.on('error', () => {});
    await new Promise((resolve) => second.once('response', resolve));
    const reset = nextClose();
    second.close(constants.NGHTTP2_CANCEL);
    expect(await reset).toBe(1006);
    s.close();
  });

  it("passes the backend's refusal on across nodes", async () => {
    const s = await session();
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/forbidden',
      ':authority': `chat.localhost:${portA}`,
      'sec-websocket-version': '13',
    });
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    await new Promise((resolve) => stream.once('end', resolve));
    s.close();
    expect(head[':status']).toBe(403);
    expect(Buffer.concat(chunks).toString()).toBe('not allowed!');
  });

  it("answers the owner's 504 for a backend that never answers the upgrade; the owner is not marked unreachable", async () => {
    const s = await session();
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/silent',
      ':authority': `chat.localhost:${portA}`,
      'sec-websocket-version': '13',
    });
    stream.on('error', () => {});
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    s.close();
    // The owner's own answer at its response timeout, not the ingress node calling a live owner unreachable.
    expect(head[':status']).toBe(504);
    expect(head['x-tunnel2-error']).toBe('TUNNEL2_ERR_RESPONSE_TIMEOUT');
  });

  it('answers 502 across nodes when the backend answers the upgrade 200, not 101', async () => {
    const s = await session();
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/ignores-upgrade',
      ':authority': `chat.localhost:${portA}`,
      'sec-websocket-version': '13',
    });
    stream.on('error', () => {});
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    s.close();
    expect(head[':status']).toBe(502);
  });

  it('answers 502 NODE_UNREACHABLE at once when the owner node does not accept the connection', async () => {
    // A node that advertises an address nothing listens on (a node gone without withdrawing its record).
    const closed = createNetServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const pair = await twoNodes({ b: { cluster: { nodeUrl: `http://127.0.0.1:${deadPort}` } } });
    const agent = await connect({
      target: (backend.address() as AddressInfo).port,
      server: pair.b.url,
      subdomain: 'far',
    });
    try {
      const s = h2c(pair.portA);
      await new Promise((resolve) => s.once('remoteSettings', resolve));
      const stream = s.request({
        ':method': 'CONNECT',
        ':protocol': 'websocket',
        ':scheme': 'http',
        ':path': '/echo',
        ':authority': `far.localhost:${pair.portA}`,
        'sec-websocket-version': '13',
      });
      stream.on('error', () => {});
      const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
      s.close();
      expect(head[':status']).toBe(502);
      expect(head['x-tunnel2-error']).toBe('TUNNEL2_ERR_NODE_UNREACHABLE');
      expect(head['retry-after']).toBe('5');
    } finally {
      await agent.close(0);
      await pair.a.close(0);
      await pair.b.close(0);
    }
  });
});
