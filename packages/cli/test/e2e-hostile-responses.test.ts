import { once } from 'node:events';
import { connect } from 'node:net';
import { buildEdge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hostileAgent, responseHead } from './support/hostile-agent.js';
import { rawExchange } from './support/raw-client.js';
import { silent, until } from './support/stack.js';

// The edge checks the agent's response like a proxy checks an origin's: one framing, a valid head, and
// exactly the declared number of body bytes. Each hostile agent below answers by the request's path.

const edge = buildEdge({ port: 0, logger: silent });
let port = 0;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  const listening = await edge.listen();
  port = listening.port;
  cleanups.push(() => edge.close(0));
  cleanups.push(
    await hostileAgent(listening.url, 'evil', (stream, { target }) => {
      const interim = /^\/interim-(\d+)$/.exec(target);
      if (interim) {
        for (let i = 0; i < Number(interim[1]); i++) stream.sendHeaders(responseHead(102), false);
        stream.sendHeaders(responseHead(200, ['Content-Length', '2'], 'OK'), false);
        stream.write(Buffer.from('ok'));
        stream.end();
        return;
      }
      const [status, headers, reason, body] = answers[target] ?? [200, [], 'OK', ''];
      // No body: the head itself ends the stream (END_STREAM on HEADERS).
      stream.sendHeaders(responseHead(status, headers, reason), body === '');
      if (body === '') return;
      stream.write(Buffer.from(body, 'latin1'));
      stream.end();
    }),
  );
  cleanups.push(
    await hostileAgent(listening.url, 'good', (stream) => {
      stream.sendHeaders(responseHead(200, ['Content-Length', '6'], 'OK'), false);
      stream.write(Buffer.from('b-body'));
      stream.end();
    }),
  );
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const injected = 'HTTP/1.1 200 OK\r\nContent-Length: 8\r\nSet-Cookie: stolen=1\r\n\r\ninjected';

/** path → [status, headers, reason, body the agent sends after the head]. */
const answers: Record<string, [number, string[], string, string]> = {
  '/inject': [200, ['Content-Length', '5'], 'OK', `hello${injected}`],
  '/short': [200, ['Content-Length', '10'], 'OK', 'hello'],
  '/204': [204, [], 'No Content', 'xyz'],
  '/304': [304, ['Content-Length', '3'], 'Not Modified', 'xyz'],
  '/head': [200, ['Content-Length', '3'], 'OK', 'xyz'],
  '/cl-conflict': [200, ['Content-Length', '3', 'Content-Length', '4'], 'OK', 'xyz'],
  '/cl-list': [200, ['Content-Length', '3, 4'], 'OK', 'xyz'],
  '/cl-text': [200, ['Content-Length', 'abc'], 'OK', 'xyz'],
  '/cl-te': [200, ['Content-Length', '3', 'Transfer-Encoding', 'chunked'], 'OK', 'xyz'],
  '/te-gzip': [200, ['Transfer-Encoding', 'gzip'], 'OK', 'xyz'],
  '/reason': [200, [], 'OK\r\nSet-Cookie: stolen=1', 'xyz'],
  '/name': [200, ['Bad\r\nName', 'x'], 'OK', 'xyz'],
  '/199': [199, [], 'Weird', 'xyz'],
  '/199-end': [199, [], 'Weird', ''],
  '/0': [0, [], 'Zero', 'xyz'],
  '/1000': [1000, [], 'Big', 'xyz'],
  '/101': [101, ['Upgrade', 'websocket', 'Connection', 'Upgrade'], 'Switching Protocols', 'xyz'],
  '/cl-same': [200, ['Content-Length', '3', 'content-length', '3'], 'OK', 'xyz'],
  '/te-chunked': [200, ['Transfer-Encoding', 'chunked'], 'OK', 'xyz'],
  '/hop': [
    200,
    [
      'X-Secret',
      's',
      'Connection',
      'X-Secret, close',
      'Keep-Alive',
      't=5',
      'X-Kept',
      'k',
      'Content-Length',
      '3',
    ],
    'OK',
    'xyz',
  ],
};

/** Pipelines requests on one connection, as a front proxy reusing it would; everything read until it closes. */
async function pipelined(requests: string[]): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
  });
  socket.write(requests.join(''), 'latin1');
  await once(socket, 'close');
  return text;
}

const request = (host: string, path: string, method = 'GET') =>
  `${method} ${path} HTTP/1.1\r\nHost: ${host}.localhost:${port}\r\n\r\n`;
const last = (host: string, path: string) =>
  `GET ${path} HTTP/1.1\r\nHost: ${host}.localhost:${port}\r\nConnection: close\r\n\r\n`;

it('bytes beyond the declared length never reach the client: the connection closes after the response', async () => {
  const text = await pipelined([request('evil', '/inject'), last('good', '/')]);
  expect(text).not.toContain('injected');
  expect(text).not.toContain('stolen');
  expect(text).not.toContain('b-body');
  expect(text.match(/HTTP\/1\.1 /g)?.length ?? 0).toBeLessThanOrEqual(1);
  await until(() => edge.inFlight === 0);
});

it('a body short of its declared length is an aborted response, never a kept-alive one', async () => {
  const text = await pipelined([request('evil', '/short'), last('good', '/')]);
  expect(text).not.toContain('b-body');
  expect(text).not.toMatch(/hello.*HTTP\/1\.1/s);
  await until(() => edge.inFlight === 0);
});

it.each([
  ['/204', 'GET'],
  ['/304', 'GET'],
  ['/head', 'HEAD'],
])('%s (%s) with body bytes: they are excess, the connection closes', async (path, method) => {
  const text = await pipelined([request('evil', path, method), last('good', '/')]);
  expect(text).not.toContain('xyz');
  expect(text).not.toContain('b-body');
  await until(() => edge.inFlight === 0);
});

it.each([
  ['/cl-conflict', 'Content-Length has conflicting values (3 and 4)'],
  ['/cl-list', 'Content-Length has conflicting values (3 and 4)'],
  ['/cl-text', 'Content-Length "abc" is not a decimal length'],
  ['/cl-te', 'both Transfer-Encoding and Content-Length are present'],
  ['/te-gzip', 'Transfer-Encoding "gzip" does not end in chunked'],
  ['/reason', 'reason phrase "OK\\r\\nSet-Cookie: stolen=1" has a forbidden character'],
  ['/name', 'header name "Bad\\r\\nName" is not a token'],
  ['/199', 'body bytes before a final response head'],
  ['/199-end', 'the stream ended after the interim status 199'],
  ['/0', 'bad status 0'],
  ['/1000', 'bad status 1000'],
  ['/101', 'status 101 answers a request that asked for no upgrade'],
])('%s is an invalid head: 502 with the edge own reason phrase and what was wrong', async (path, problem) => {
  const text = await rawExchange(port, last('evil', path));
  // Only a valid interim head (the 199) may come before the 502.
  expect(text).toMatch(/^(HTTP\/1\.1 199 Weird\r\n\r\n)?HTTP\/1\.1 502 Bad Gateway\r\n/);
  expect(text).toContain('x-tunnel2-error: TUNNEL2_ERR_STREAM_FAILED\r\n');
  expect(text).toContain(`tunnel evil: the backend sent an invalid response head: ${problem}\n`);
  expect(text).not.toMatch(/\r\nSet-Cookie/i);
  expect(text).not.toContain('xyz');
  await until(() => edge.inFlight === 0);
});

it('repeated identical lengths and a chunked Transfer-Encoding are framings the edge accepts', async () => {
  const same = await rawExchange(port, last('evil', '/cl-same'));
  expect(same).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(same.match(/content-length: 3\r\n/gi)?.length).toBe(1);
  expect(same).toMatch(/\r\n\r\nxyz$/);
  const chunked = await rawExchange(port, last('evil', '/te-chunked'));
  expect(chunked).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(chunked.match(/transfer-encoding: chunked\r\n/gi)?.length).toBe(1);
  expect(chunked).toMatch(/\r\n\r\n3\r\nxyz\r\n0\r\n\r\n$/);
});

it("the agent's hop-by-hop fields never reach the client, whatever else its head carries", async () => {
  const text = await rawExchange(port, last('evil', '/hop'));
  expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(text).toMatch(/\r\nX-Kept: k\r\n/);
  expect(text).not.toMatch(/x-secret|keep-alive|t=5/i);
  expect(text).toMatch(/\r\n\r\nxyz$/);
});

it('an HTTP/1.0 client gets a body of undeclared length delimited by the close', async () => {
  const text = await rawExchange(port, `GET /te-chunked HTTP/1.0\r\nHost: evil.localhost:${port}\r\n\r\n`);
  expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(text).not.toMatch(/transfer-encoding/i);
  expect(text).toMatch(/\r\n\r\nxyz$/);
});

it('up to MAX_INTERIM_HEADS (32) interim heads pass; one more fails the stream with a 502', async () => {
  const fine = await rawExchange(port, last('evil', '/interim-32'));
  expect(fine.match(/HTTP\/1\.1 102 Processing\r\n\r\n/g)?.length).toBe(32);
  expect(fine).toMatch(/HTTP\/1\.1 200 OK\r\n.*\r\n\r\nok$/s);
  const flood = await rawExchange(port, last('evil', '/interim-33'));
  expect(flood.match(/HTTP\/1\.1 102 Processing\r\n\r\n/g)?.length).toBe(32);
  expect(flood).toContain('HTTP/1.1 502 Bad Gateway\r\n');
  expect(flood).toContain('the backend sent an invalid response head: more than 32 interim (1xx) responses');
  expect(flood).not.toContain('\r\n\r\nok');
  await until(() => edge.inFlight === 0);
});
