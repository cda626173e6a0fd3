import { buildEdge } from '@tunnel2/edge';
import { encodeResponseHead } from '@tunnel2/protocol';
import { afterAll, expect, it } from 'vitest';
import { hostileAgent } from './support/hostile-agent.js';
import { send } from './support/http-client.js';
import { rawExchange } from './support/raw-client.js';
import { silent, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('CR/LF smuggled into response headers by an agent gets 502, and the edge keeps serving', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  cleanups.push(
    await hostileAgent(url, 'evil', (stream, { target }) => {
      const headers =
        target === '/split'
          ? ['X-Ok', 'fine\r\nSet-Cookie: stolen=1']
          : target === '/badname'
            ? ['Bad\r\nName', 'x']
            : ['Content-Length', '2'];
      stream.sendHeaders(encodeResponseHead({ status: 200, statusMessage: 'OK', headers }, 65_536), false);
      stream.write(Buffer.from('ok'));
      stream.end();
    }),
  );
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

it('an agent cannot smuggle through interim heads: an unsafe 1xx or an interim 101 gets 502, nothing of it reaches the client', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const head = (status: number, headers: string[], statusMessage = '') =>
    encodeResponseHead({ status, statusMessage, headers }, 65_536);
  cleanups.push(
    await hostileAgent(url, 'interim', (stream, { target }) => {
      stream.sendHeaders(head(100, []), false);
      if (target === '/link')
        stream.sendHeaders(head(103, ['Link', '</a.css>; rel=preload\r\nSet-Cookie: stolen=1']), false);
      if (target === '/reason')
        stream.sendHeaders(head(102, [], 'Processing\r\nSet-Cookie: stolen=2'), false);
      if (target === '/101')
        stream.sendHeaders(head(101, ['Upgrade', 'websocket', 'Connection', 'Upgrade']), false);
      stream.sendHeaders(head(200, ['Content-Type', 'text/plain'], 'OK'), false);
      stream.write(Buffer.from('ok'));
      stream.end();
    }),
  );
  for (const [path, problem] of [
    ['/link', 'header "Link" has a forbidden character in its value'],
    ['/reason', 'reason phrase "Processing\\r\\nSet-Cookie: stolen=2" has a forbidden character'],
    ['/101', 'status 101 answers a request that asked for no upgrade'],
  ] as const) {
    const text = await rawExchange(
      port,
      `GET ${path} HTTP/1.1\r\nHost: interim.localhost:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain(`the backend sent an invalid response head: ${problem}`);
    expect(text).not.toMatch(/\r\nSet-Cookie/i);
    expect(text).not.toMatch(/HTTP\/1\.1 101/);
  }
  expect(edge.inFlight).toBe(0);
});

it('trailers with unsafe fields or names that are not tokens are dropped, the response they end is kept', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  cleanups.push(
    await hostileAgent(url, 'trailers', (stream, { target }) => {
      const head = (status: number, headers: string[], statusMessage = '') =>
        encodeResponseHead({ status, statusMessage, headers }, 65_536);
      stream.sendHeaders(head(200, ['Content-Type', 'text/plain'], 'OK'), false);
      stream.write(Buffer.from('ok'));
      const trailer =
        target === '/name' ? ['Bad Name', 'stolen=4'] : ['X-Trailer', 'a\r\nSet-Cookie: stolen=3'];
      stream.sendHeaders(head(200, trailer), true);
    }),
  );
  for (const path of ['/crlf', '/name']) {
    const text = await rawExchange(
      port,
      `GET ${path} HTTP/1.1\r\nHost: trailers.localhost:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).not.toContain('stolen');
    expect(text).toMatch(/\r\n\r\n2\r\nok\r\n0\r\n\r\n$/);
  }
});

it('the upgrade path checks the head the same way, and never writes raw bytes before it or beyond a length', async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const injected = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nX-Injected: 1\r\n\r\n';
  cleanups.push(
    await hostileAgent(url, 'upgrade', (stream, { target }) => {
      const head = (status: number, headers: string[]) =>
        encodeResponseHead({ status, statusMessage: '', headers }, 65_536);
      if (target === '/early-data') {
        stream.write(Buffer.from(injected));
        stream.end();
        return;
      }
      if (target === '/bad-101') {
        stream.sendHeaders(head(101, ['Upgrade', 'websocket', 'Bad Name', 'x']), false);
      } else {
        stream.sendHeaders(head(403, ['Content-Length', '4']), false);
        stream.write(Buffer.from(`nope${injected}`));
      }
      stream.end();
    }),
  );
  const upgrade = (path: string) =>
    rawExchange(
      port,
      `GET ${path} HTTP/1.1\r\nHost: upgrade.localhost:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
  for (const [path, problem] of [
    ['/early-data', 'body bytes before a final response head'],
    ['/bad-101', 'header name "Bad Name" is not a token'],
  ] as const) {
    const text = await upgrade(path);
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(text).toContain(`the backend sent an invalid response head: ${problem}`);
    expect(text).not.toContain('X-Injected');
  }
  const refused = await upgrade('/refusal');
  expect(refused).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
  expect(refused).toMatch(/\r\n\r\nnope$/);
  await until(() => edge.inFlight === 0);
});
