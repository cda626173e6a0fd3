import { buildEdge } from '@tunnel2/edge';
import { encodeResponseHead } from '@tunnel2/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { h2c, h2Request } from './support/h2-client.js';
import { hostileAgent } from './support/hostile-agent.js';
import { silent } from './support/stack.js';

// An agent's head passes the exchange's checks (token names, no CR/LF/NUL, status 100-999) yet node:http2
// may still refuse it: a field it holds single-valued (Content-Type, ETag…) given twice, a final status
// outside 200-599. The edge's HTTP/2 side sends the head at the end of the tick, after the exchange's
// try/catch; a refusal there would reset the stream rather than answer 502, and from an interim head or
// the trailers it must cost the one exchange, never the client's connection or the edge's process.

const cleanups: (() => unknown)[] = [];
const crashes: Error[] = [];
const onUncaught = (err: Error): void => {
  crashes.push(err);
};
let port = 0;

const head = (status: number, headers: string[]) =>
  encodeResponseHead({ status, statusMessage: '', headers }, 65_536);

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  const edge = buildEdge({ port: 0, logger: silent });
  const listening = await edge.listen();
  port = listening.port;
  cleanups.push(() => edge.close(0));
  cleanups.push(
    await hostileAgent(listening.url, 'dup', (stream, { target }) => {
      if (target === '/head') {
        stream.sendHeaders(head(200, ['Content-Type', 'a/b', 'Content-Type', 'c/d']), false);
        stream.write(Buffer.from('body'));
        stream.end();
      } else if (target === '/status' || target === '/status-end') {
        // A status HTTP/1.1 carries (the check allows 100-999) and HTTP/2 cannot (200-599 final).
        const end = target === '/status-end';
        stream.sendHeaders(head(700, ['Content-Type', 'text/plain']), end);
        if (!end) {
          stream.write(Buffer.from('body'));
          stream.end();
        }
      } else if (target === '/interim') {
        stream.sendHeaders(head(103, ['Content-Type', 'a/b', 'Content-Type', 'c/d']), false);
        stream.sendHeaders(head(200, ['Content-Type', 'text/plain']), false);
        stream.write(Buffer.from('ok'));
        stream.end();
      } else if (target === '/trailers') {
        stream.sendHeaders(head(200, ['Content-Type', 'text/plain', 'Transfer-Encoding', 'chunked']), false);
        // Enough body that the stream asks for its trailers later, from node:http2's own callback.
        stream.write(Buffer.alloc(200_000, 'p'));
        stream.sendHeaders(head(0, ['Content-Type', 'a/b', 'Content-Type', 'c/d']), true);
      } else {
        stream.sendHeaders(head(200, ['Content-Type', 'text/plain']), false);
        stream.write(Buffer.from('fine'));
        stream.end();
      }
    }),
  );
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  process.off('uncaughtException', onUncaught);
});

function get(path: string, session = h2c(port)) {
  cleanups.push(() => session.close());
  return h2Request(session, { ':path': path, ':authority': `dup.localhost:${port}` });
}

it('a single-valued field given twice reaches the client as given, as on HTTP/1.1', async () => {
  const answer = await get('/head');
  expect(answer.status).toBe(200);
  // Node's client keeps the first of a single-valued field received twice.
  expect(answer.headers['content-type']).toBe('a/b');
  expect(answer.body.toString()).toBe('body');
  expect(crashes).toEqual([]);
});

it('a final status HTTP/2 cannot carry is answered 502 (with or without a body), never a reset', async () => {
  for (const path of ['/status', '/status-end']) {
    const answer = await get(path);
    expect(answer.rstCode).toBeUndefined();
    expect(answer.status).toBe(502);
    expect(answer.body.toString()).toContain('invalid response head');
  }
  expect(crashes).toEqual([]);
});

it('an interim head node:http2 refuses is dropped; the final answer follows', async () => {
  const answer = await get('/interim');
  expect(answer.status).toBe(200);
  expect(answer.body.toString()).toBe('ok');
  expect(crashes).toEqual([]);
});

it('trailers node:http2 refuses reset the stream (the body was cut short), never crash the edge', async () => {
  const session = h2c(port);
  const answer = await get('/trailers', session);
  expect(answer.status).toBe(200);
  expect(answer.trailers).toBeUndefined();
  expect(answer.rstCode).toBeGreaterThan(0);
  expect(crashes).toEqual([]);
  // The one stream, not the client's connection: its next request on it is answered.
  expect(session.destroyed).toBe(false);
  const fine = await get('/fine', session);
  expect(fine.status).toBe(200);
  expect(fine.body.toString()).toBe('fine');
});
