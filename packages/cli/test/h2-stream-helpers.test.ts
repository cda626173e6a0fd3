import { once } from 'node:events';
import { connect, createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Queued, trailersMayFollow } from '../src/forwarding/http2/queued-frames.js';
import { listenUntilClose } from '../src/forwarding/http2/stream-listeners.js';

// The HTTP/2 exchange's two helpers: whether request trailers may still come after the frames queued before
// the backend stream existed, and listeners that leave a backend stream as it closes (a real node:http2
// server and client on loopback).

describe('trailersMayFollow', () => {
  const data: Queued = { data: Buffer.from('x') };
  const trailers: Queued = { trailers: Buffer.from('t') };
  const end: Queued = { end: true };

  it('says yes until the body has ended', () => {
    expect(trailersMayFollow([])).toBe(true);
    expect(trailersMayFollow([data])).toBe(true);
  });

  it('says no once the body ended without a trailer head', () => {
    expect(trailersMayFollow([end])).toBe(false);
    expect(trailersMayFollow([data, data, end])).toBe(false);
  });

  it('says yes when the body ended with a trailer head', () => {
    expect(trailersMayFollow([data, trailers, end])).toBe(true);
  });
});

let server: Http2Server | undefined;
afterEach(async () => {
  if (server === undefined) return;
  const closed = once(server, 'close');
  server.close();
  await closed;
  server = undefined;
});

describe('listenUntilClose', () => {
  it('takes every listener it added off the stream as it closes, after the caller heard close', async () => {
    server = createServer();
    server.on('stream', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('hello');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const stream = session.request({ ':path': '/' }, { endStream: true });
      const on = listenUntilClose(stream);
      const heard: string[] = [];
      const mine = new Map<string, () => void>();
      for (const event of ['response', 'data', 'end']) {
        const listener = (): void => {
          heard.push(event);
        };
        mine.set(event, listener);
        on(event, listener);
      }
      await new Promise<void>((resolve) => {
        const listener = (): void => {
          heard.push('close');
          resolve();
        };
        mine.set('close', listener);
        on('close', listener);
      });
      expect(heard).toEqual(['response', 'data', 'end', 'close']);
      // None of them is left on the stream (Node's own listeners are not the helper's business).
      for (const [event, listener] of mine) expect(stream.listeners(event)).not.toContain(listener);
    } finally {
      session.close();
    }
  });
});
