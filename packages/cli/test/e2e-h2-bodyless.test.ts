import { buildEdge } from '@tunnel2/edge';
import { encodeResponseHead } from '@tunnel2/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { h2c, h2Request } from './support/h2-client.js';
import { hostileAgent } from './support/hostile-agent.js';
import { silent } from './support/stack.js';

// Answers without a body on the edge's HTTP/2 side (RFC 9110 §6.4.1): to HEAD, 204 and 304 the stream ends
// with its head, its Content-Length kept (it describes the GET's body) and no DATA frame; body bytes an
// agent sends anyway never reach the client.

const cleanups: (() => unknown)[] = [];
let port = 0;

const head = (status: number, headers: string[]) =>
  encodeResponseHead({ status, statusMessage: '', headers }, 65_536);

beforeAll(async () => {
  const edge = buildEdge({ port: 0, logger: silent });
  const listening = await edge.listen();
  port = listening.port;
  cleanups.push(() => edge.close(0));
  cleanups.push(
    await hostileAgent(listening.url, 'bodyless', (stream, { target }) => {
      const status = Number(target.slice(1, 4));
      const headers =
        status === 304 ? ['ETag', '"v1"'] : ['Content-Length', '5', 'Content-Type', 'text/plain'];
      stream.sendHeaders(head(status, status === 204 ? [] : headers), false);
      if (target.endsWith('/extra')) stream.write(Buffer.from('hello'));
      stream.end();
    }),
  );
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function request(method: string, path: string) {
  const session = h2c(port);
  cleanups.push(() => session.close());
  return h2Request(session, { ':method': method, ':path': path, ':authority': `bodyless.localhost:${port}` });
}

it('HEAD: the head with its Content-Length, no body, the stream ended cleanly', async () => {
  const answer = await request('HEAD', '/200');
  expect(answer.status).toBe(200);
  expect(answer.headers['content-length']).toBe('5');
  expect(answer.body.length).toBe(0);
  expect(answer.rstCode).toBeUndefined();
});

it('204 and 304: the head alone, the stream ended cleanly', async () => {
  const noContent = await request('GET', '/204');
  expect(noContent.status).toBe(204);
  expect(noContent.body.length).toBe(0);
  expect(noContent.rstCode).toBeUndefined();
  const notModified = await request('GET', '/304');
  expect(notModified.status).toBe(304);
  expect(notModified.headers.etag).toBe('"v1"');
  expect(notModified.body.length).toBe(0);
  expect(notModified.rstCode).toBeUndefined();
});

it('body bytes an agent sends to HEAD never reach the client as DATA', async () => {
  const answer = await request('HEAD', '/200/extra');
  expect(answer.status).toBe(200);
  expect(answer.body.length).toBe(0);
});
