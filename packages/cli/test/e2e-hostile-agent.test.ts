import { once } from 'node:events';
import { buildEdge } from '@tunnel2/edge';
import { decodeRequestHead, encodeResponseHead, MuxSession, type MuxStream } from '@tunnel2/protocol';
import { afterAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { send } from './support/http-client.js';
import { rawExchange } from './support/raw-client.js';
import { silent } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An agent that speaks the protocol correctly but answers every request with the given head. */
async function hostileAgent(url: string, name: string, answer: (stream: MuxStream, target: string) => void) {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/_tunnel2/connect?name=${name}`, {
    perMessageDeflate: false,
  });
  await once(ws, 'open');
  let helloAnswered: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    helloAnswered = resolve;
  });
  const session = new MuxSession({
    role: 'agent',
    settings: { heartbeatIntervalMs: 0 },
    transport: {
      send: (message, done) => ws.send(message, { binary: true }, done),
      close: () => ws.close(),
    },
    handler: {
      onHello: () => helloAnswered(),
      onClose: () => {},
      onStream: (stream) => {
        stream.handler = {
          onHeaders: (payload) => answer(stream, decodeRequestHead(payload).target),
          onData: (chunk) => stream.consume(chunk.length),
          onEnd: () => {},
          onReset: () => {},
          onDrain: () => {},
        };
      },
    },
  });
  ws.on('message', (data) => session.receive(data as Buffer));
  ws.on('close', () => session.transportClosed());
  session.sendHello({ agent: 'hostile' }, false);
  await ready;
  cleanups.push(() => ws.terminate());
}

it('CR/LF smuggled into response headers by an agent gets 502, and the edge keeps serving', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  await hostileAgent(url, 'evil', (stream, target) => {
    const headers =
      target === '/split'
        ? ['X-Ok', 'fine\r\nSet-Cookie: stolen=1']
        : target === '/badname'
          ? ['Bad\r\nName', 'x']
          : ['Content-Length', '2'];
    stream.sendHeaders(encodeResponseHead({ status: 200, statusMessage: 'OK', headers }, 65_536), false);
    stream.write(Buffer.from('ok'));
    stream.end();
  });
  for (const path of ['/split', '/badname']) {
    const res = await send({ port, path, headers: ['Host', `evil.localhost:${port}`] });
    expect(res.status).toBe(502);
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(res.body.toString()).toContain('invalid response head');
  }
  const fine = await send({ port, path: '/fine', headers: ['Host', `evil.localhost:${port}`] });
  expect(fine.status).toBe(200);
  expect(fine.body.toString()).toBe('ok');
});

it('an agent cannot smuggle through interim heads or trailers: unsafe 1xx, an interim 101 and bad trailers are dropped', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  await hostileAgent(url, 'interim', (stream) => {
    const head = (status: number, headers: string[], statusMessage = '') =>
      encodeResponseHead({ status, statusMessage, headers }, 65_536);
    stream.sendHeaders(head(103, ['Link', '</a.css>; rel=preload\r\nSet-Cookie: stolen=1']), false);
    stream.sendHeaders(head(102, [], 'Processing\r\nSet-Cookie: stolen=2'), false);
    stream.sendHeaders(head(101, ['Upgrade', 'websocket', 'Connection', 'Upgrade']), false);
    stream.sendHeaders(head(200, ['Content-Type', 'text/plain'], 'OK'), false);
    stream.write(Buffer.from('ok'));
    stream.sendHeaders(head(200, ['X-Trailer', 'a\r\nSet-Cookie: stolen=3']), true);
  });
  const text = await rawExchange(
    port,
    `GET / HTTP/1.1\r\nHost: interim.localhost:${port}\r\nConnection: close\r\n\r\n`,
  );
  expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(text).not.toContain('stolen');
  expect(text).not.toContain(' 101 ');
  expect(text).toMatch(/\r\n\r\n2\r\nok\r\n0\r\n\r\n$/);
});
