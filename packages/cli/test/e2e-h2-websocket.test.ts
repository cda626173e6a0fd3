import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type ClientHttp2Session, type ClientHttp2Stream, constants } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { buildEdge, createEdgeMetrics, type Edge, installRequestIds } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { h2c } from './support/h2-client.js';
import { silent, until } from './support/stack.js';
import { clientClose, clientFrame, FrameReader, OPCODE } from './support/ws-frames.js';

// RFC 8441: a WebSocket opened as an HTTP/2 stream (extended CONNECT, `:protocol websocket`) on the edge's
// h2c port reaches a real `ws` server through a real agent as an ordinary HTTP/1.1 upgrade, and its frames
// flow both ways as the stream's DATA. The client frames WebSocket messages by hand (support/ws-frames.ts).

const MiB = 1024 * 1024;

interface BackendSocket {
  url: string;
  headers: IncomingHttpHeaders;
  ws: WebSocket;
  /** The close code the backend saw (1006: the connection went without a close frame). */
  closed: Promise<number>;
}

let backend: Server;
let edge: Edge;
let port: number;
const tunnels: Tunnel[] = [];
const accepted: BackendSocket[] = [];
let onAccepted: (() => void) | undefined;
/** Bytes the /flood socket has handed to its connection so far. */
let flooded = 0;
const FLOOD_MESSAGES = 1024;
const FLOOD_SIZE = 64 * 1024;
/** The /stall connection: accepted by hand, then not read. */
let stalled: ((socket: Socket) => void) | undefined;

beforeAll(async () => {
  backend = createServer((_req, res) => res.end('plain'));
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 64 * MiB });
  backend.on('upgrade', (req, socket, head) => {
    if (req.url === '/stall') {
      // The handshake by hand (RFC 6455 §4.2.2), then nothing read: a backend that stops reading.
      const accept = createHash('sha1')
        .update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
        .digest('base64');
      socket.pause();
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      stalled?.(socket as Socket);
      return;
    }
    if (req.url === '/ignores-upgrade') {
      // A backend that serves the path as a page, not seeing the upgrade: 200, not 101.
      socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<p>a page</p>');
      return;
    }
    if (req.url === '/forbidden') {
      socket.end(
        'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nnot allowed!',
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const closed = new Promise<number>((resolve) => ws.once('close', resolve));
      accepted.push({ url: req.url ?? '', headers: req.headers, ws, closed });
      onAccepted?.();
      if (req.url === '/flood') {
        // Each message after the last one reached the connection: the pace is the tunnel's.
        const chunk = Buffer.alloc(FLOOD_SIZE, 7);
        let sent = 0;
        const next = (): void => {
          if (sent++ === FLOOD_MESSAGES) return;
          ws.send(chunk, { binary: true }, () => {
            flooded += FLOOD_SIZE;
            next();
          });
        };
        next();
        return;
      }
      ws.on('message', (data, isBinary) => {
        if (req.url === '/close') ws.close(4001, 'backend says bye');
        else ws.send(data, { binary: isBinary });
      });
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const target = (backend.address() as AddressInfo).port;
  edge = buildEdge({ port: 0, logger: silent });
  installRequestIds(edge, silent);
  ({ port } = await edge.listen());
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'chat' }));
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'locked', basicAuth: 'ann:s3cret' }));
});

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  await edge.close(0);
  backend.closeAllConnections();
  await new Promise((resolve) => backend.close(resolve));
});

/** An h2c session once the edge's SETTINGS arrived (extended CONNECT needs ENABLE_CONNECT_PROTOCOL). */
async function session(): Promise<ClientHttp2Session> {
  const s = h2c(port);
  await new Promise((resolve) => s.once('remoteSettings', resolve));
  return s;
}

interface Opened {
  stream: ClientHttp2Stream;
  status: number;
  headers: IncomingHttpHeaders;
  frames: FrameReader;
  /** The body, for an answer that is not a WebSocket. */
  body: () => string;
  ended: Promise<void>;
  closed: Promise<void>;
}

/** Opens an extended CONNECT stream and waits for its response head. */
async function open(
  s: ClientHttp2Session,
  path: string,
  extra: Record<string, string> = {},
  name = 'chat',
): Promise<Opened> {
  const stream = s.request({
    ':method': 'CONNECT',
    ':protocol': 'websocket',
    ':scheme': 'http',
    ':path': path,
    ':authority': `${name}.localhost:${port}`,
    'sec-websocket-version': '13',
    ...extra,
  });
  stream.on('error', () => {});
  const frames = new FrameReader();
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    frames.push(chunk);
  });
  const ended = new Promise<void>((resolve) => stream.once('end', resolve));
  const closed = new Promise<void>((resolve) => stream.once('close', resolve));
  const headers = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
  return {
    stream,
    status: Number(headers[':status']),
    headers,
    frames,
    body: () => Buffer.concat(chunks).toString(),
    ended,
    closed,
  };
}

/** Resolves with the next socket the backend accepts. */
function nextAccepted(): Promise<BackendSocket> {
  const count = accepted.length;
  return new Promise((resolve) => {
    onAccepted = () => {
      if (accepted.length > count) resolve(accepted[count]!);
    };
  });
}

describe('RFC 8441 WebSockets over h2c', () => {
  it('announces SETTINGS_ENABLE_CONNECT_PROTOCOL', async () => {
    const s = await session();
    expect(s.remoteSettings.enableConnectProtocol).toBe(true);
    s.close();
  });

  it('carries messages both ways; the backend sees an HTTP/1.1 upgrade with a key the edge made', async () => {
    const s = await session();
    const seen = nextAccepted();
    const ws = await open(s, '/echo?room=1', {
      'sec-websocket-protocol': 'chat, superchat',
      'sec-websocket-extensions': 'x-test-extension',
      // Not HTTP/2's: replaced by the edge's own.
      'sec-websocket-key': 'client-sent-key',
    });
    expect(ws.status).toBe(200);
    expect(ws.headers['sec-websocket-protocol']).toBe('chat');
    expect(ws.headers['sec-websocket-accept']).toBeUndefined();
    expect(ws.headers.upgrade).toBeUndefined();
    const socket = await seen;
    expect(socket.url).toBe('/echo?room=1');
    expect(socket.headers.upgrade).toBe('websocket');
    expect(socket.headers.connection).toBe('Upgrade');
    expect(socket.headers['sec-websocket-key']).toMatch(/^[A-Za-z0-9+/]{22}==$/);
    expect(socket.headers['sec-websocket-version']).toBe('13');
    expect(socket.headers['sec-websocket-protocol']).toBe('chat, superchat');
    expect(socket.headers['sec-websocket-extensions']).toBe('x-test-extension');
    expect(socket.headers['x-forwarded-proto']).toBe('http');
    expect(socket.headers['x-forwarded-host']).toBe(`chat.localhost:${port}`);
    expect(socket.headers['x-request-id']).toBeDefined();

    ws.stream.write(clientFrame(OPCODE.text, 'hello over h2'));
    const big = Buffer.alloc(300 * 1024, 3);
    ws.stream.write(clientFrame(OPCODE.binary, big));
    const [text, binary] = await ws.frames.next(2);
    expect(text!.opcode).toBe(OPCODE.text);
    expect(text!.payload.toString()).toBe('hello over h2');
    expect(binary!.opcode).toBe(OPCODE.binary);
    expect(binary!.payload.equals(big)).toBe(true);

    // The client closes: its close frame, answered by the backend's, then END_STREAM both ways.
    ws.stream.end(clientClose(1000));
    expect(await socket.closed).toBe(1000);
    await ws.ended;
    await ws.closed;
    const close = ws.frames.frames.at(-1)!;
    expect(close.opcode).toBe(OPCODE.close);
    expect(close.payload.readUInt16BE(0)).toBe(1000);
    s.close();
  });

  it("keeps a message the client sends before the answer until the backend's 101, then delivers it", async () => {
    const s = await session();
    // No wait for the :status 200: the first message is in the stream's first DATA, with the request.
    const stream = s.request(
      {
        ':method': 'CONNECT',
        ':protocol': 'websocket',
        ':scheme': 'http',
        ':path': '/echo',
        ':authority': `chat.localhost:${port}`,
        'sec-websocket-version': '13',
      },
      { endStream: false },
    );
    stream.on('error', () => {});
    const frames = new FrameReader();
    stream.on('data', (chunk: Buffer) => frames.push(chunk));
    stream.write(clientFrame(OPCODE.text, 'early bird'));
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    expect(head[':status']).toBe(200);
    stream.write(clientFrame(OPCODE.text, 'second'));
    const [first, second] = await frames.next(2);
    expect(first!.payload.toString()).toBe('early bird');
    expect(second!.payload.toString()).toBe('second');
    stream.close(constants.NGHTTP2_CANCEL);
    s.close();
  });

  it('counts a WebSocket once, as an upgrade (as over HTTP/1.1), not as a request of its lifetime', async () => {
    const metrics = createEdgeMetrics(edge, 'test');
    try {
      const upgradesOf = async (): Promise<number> => {
        const { body } = await metrics.render();
        const line = body.split('\n').find((l) => l.startsWith('tunnel2_websocket_upgrades_total '));
        return Number(line?.split(' ')[1] ?? 0);
      };
      const requests = await metrics.requestTotals();
      const s = await session();
      const ws = await open(s, '/echo');
      expect(ws.status).toBe(200);
      ws.stream.end(clientClose(1000));
      await ws.closed;
      s.close();
      expect(await upgradesOf()).toBe(1);
      // Neither a 2xx of an hour-long "request" in the latency histogram nor an aborted one.
      expect(await metrics.requestTotals()).toEqual(requests);
    } finally {
      metrics.close();
    }
  });

  it('a client that resets its stream closes the backend socket', async () => {
    const s = await session();
    const seen = nextAccepted();
    const ws = await open(s, '/echo');
    const socket = await seen;
    ws.stream.close(constants.NGHTTP2_CANCEL);
    expect(await socket.closed).toBe(1006);
    s.close();
  });

  it('a backend that closes ends the client stream after its close frame', async () => {
    const s = await session();
    const ws = await open(s, '/close');
    expect(ws.status).toBe(200);
    ws.stream.write(clientFrame(OPCODE.text, 'bye?'));
    const [close] = await ws.frames.next(1);
    expect(close!.opcode).toBe(OPCODE.close);
    expect(close!.payload.readUInt16BE(0)).toBe(4001);
    expect(close!.payload.subarray(2).toString()).toBe('backend says bye');
    // The backend's connection ends after the closing handshake: so does the client's stream.
    ws.stream.end(clientClose(4001));
    await ws.ended;
    await ws.closed;
    s.close();
  });

  it('answers 502 when the backend answers the upgrade 200 (under RFC 8441 every 2xx reads as accepted)', async () => {
    const s = await session();
    const ws = await open(s, '/ignores-upgrade');
    await ws.closed;
    s.close();
    expect(ws.status).toBe(502);
    expect(ws.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_STREAM_FAILED');
    expect(ws.body()).not.toContain('a page');
  });

  it("passes a backend's refusal on as the HTTP/2 response", async () => {
    const s = await session();
    const ws = await open(s, '/forbidden');
    await ws.ended;
    expect(ws.status).toBe(403);
    expect(ws.headers['content-type']).toBe('text/plain');
    expect(ws.body()).toBe('not allowed!');
    s.close();
  });

  it('answers another :protocol 501, and a CONNECT without one 405 as before', async () => {
    const s = await session();
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'webtransport',
      ':scheme': 'http',
      ':path': '/echo',
      ':authority': `chat.localhost:${port}`,
    });
    stream.on('error', () => {});
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    expect(head[':status']).toBe(501);
    expect(head['x-tunnel2-error']).toBe('TUNNEL2_ERR_UPGRADE_UNSUPPORTED');
    const plain = s.request({ ':method': 'CONNECT', ':authority': `chat.localhost:${port}` });
    plain.on('error', () => {});
    const plainHead = await new Promise<IncomingHttpHeaders>((resolve) => plain.once('response', resolve));
    expect(plainHead[':status']).toBe(405);
    s.close();
  });

  it("applies the agent's basic auth as to an HTTP/1.1 upgrade", async () => {
    const s = await session();
    const refused = await open(s, '/echo', {}, 'locked');
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain('Basic');
    const allowed = await open(
      s,
      '/echo',
      { authorization: `Basic ${Buffer.from('ann:s3cret').toString('base64')}` },
      'locked',
    );
    expect(allowed.status).toBe(200);
    allowed.stream.write(clientFrame(OPCODE.text, 'let in'));
    const [echo] = await allowed.frames.next(1);
    expect(echo!.payload.toString()).toBe('let in');
    allowed.stream.close(constants.NGHTTP2_CANCEL);
    s.close();
  });

  it('a client that stops reading holds the backend back (the windows bound it); reading again gets all', async () => {
    const s = await session();
    const ws = await open(s, '/flood');
    ws.stream.pause();
    let last = -1;
    let steady = 0;
    await until(() => {
      steady = flooded === last ? steady + 1 : 0;
      last = flooded;
      return steady >= 10;
    });
    const total = FLOOD_MESSAGES * FLOOD_SIZE;
    console.log(
      `backend handed ${(flooded / MiB).toFixed(1)} MiB of ${total / MiB} MiB to its socket while the HTTP/2 WebSocket reader was stalled`,
    );
    expect(flooded).toBeLessThan(total / 2);
    ws.stream.resume();
    const frames = await ws.frames.next(FLOOD_MESSAGES);
    expect(frames.reduce((sum, frame) => sum + frame.payload.length, 0)).toBe(total);
    ws.stream.close(constants.NGHTTP2_CANCEL);
    s.close();
  });

  it('a backend that stops reading holds the client back (the windows bound it); reading again gets all', async () => {
    const backendSocket = new Promise<Socket>((resolve) => {
      stalled = resolve;
    });
    const s = await session();
    const ws = await open(s, '/stall');
    expect(ws.status).toBe(200);
    const socket = await backendSocket;
    const frame = clientFrame(OPCODE.binary, Buffer.alloc(FLOOD_SIZE, 5));
    const total = FLOOD_MESSAGES * frame.length;
    // Written only as fast as the stream takes it ('drain'): what left the client is what the windows took.
    let sent = 0;
    const pump = (): void => {
      while (sent < total) {
        sent += frame.length;
        if (!ws.stream.write(frame)) {
          ws.stream.once('drain', pump);
          return;
        }
      }
    };
    pump();
    let last = -1;
    let steady = 0;
    await until(() => {
      steady = sent === last ? steady + 1 : 0;
      last = sent;
      return steady >= 10;
    });
    console.log(
      `the client got ${(sent / MiB).toFixed(1)} MiB of ${(total / MiB).toFixed(0)} MiB out while the backend read nothing`,
    );
    expect(sent).toBeLessThan(total / 2);
    let received = 0;
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received === total) resolve();
      });
      socket.resume();
    });
    expect(received).toBe(total);
    // The client leaves: the backend's connection ends (a server's upgraded socket stays half open).
    const ended = new Promise((resolve) => socket.once('end', resolve));
    ws.stream.close(constants.NGHTTP2_CANCEL);
    await ended;
    socket.destroy();
    s.close();
  });

  it('edge.close: GOAWAY at once, an open WebSocket keeps working through the grace, then its stream ends', async () => {
    const own = buildEdge({ port: 0, logger: silent });
    const ownPort = (await own.listen()).port;
    const agent = await connect({
      target: (backend.address() as AddressInfo).port,
      server: own.url,
      subdomain: 'closing',
    });
    const s = h2c(ownPort);
    s.on('error', () => {});
    await new Promise((resolve) => s.once('remoteSettings', resolve));
    const goaway = new Promise<void>((resolve) => s.once('goaway', () => resolve()));
    const stream = s.request({
      ':method': 'CONNECT',
      ':protocol': 'websocket',
      ':scheme': 'http',
      ':path': '/echo',
      ':authority': `closing.localhost:${ownPort}`,
      'sec-websocket-version': '13',
    });
    stream.on('error', () => {});
    const frames = new FrameReader();
    stream.on('data', (chunk: Buffer) => frames.push(chunk));
    const closedStream = new Promise<void>((resolve) => stream.once('close', resolve));
    const head = await new Promise<IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
    expect(head[':status']).toBe(200);
    const seen = accepted.at(-1)!;
    const stopped = own.close(1_500);
    await goaway;
    // Within the grace: the WebSocket still carries messages both ways.
    stream.write(clientFrame(OPCODE.text, 'still here'));
    const [echo] = await frames.next(1);
    expect(echo!.payload.toString()).toBe('still here');
    await stopped;
    await closedStream;
    // The backend's socket is not left open past the edge's stop.
    expect(await seen.closed).toBe(1006);
    await agent.close(0);
    s.destroy();
  });
});
