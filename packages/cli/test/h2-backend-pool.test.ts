import { once } from 'node:events';
import { createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { H2Backend } from '../src/forwarding/http2/h2-backend.js';
import { makeCertificates } from './support/https-backend.js';
import { until } from './support/stack.js';

// The agent's pool of HTTP/2 backend sessions, against a real node:http2 server that holds every stream
// open until told: which session each stream goes to, and how many the backend was made to take at once.

let server: Http2Server | undefined;
let pool: H2Backend | undefined;
afterEach(async () => {
  pool?.close();
  if (server !== undefined) {
    const closed = once(server, 'close');
    server.close();
    await closed;
  }
});

/** A backend allowing `maxConcurrentStreams` streams per connection, answering each only on `release()`. */
async function holdingBackend(maxConcurrentStreams: number) {
  const held: ServerHttp2Stream[] = [];
  const sessions = new Set<import('node:http2').ServerHttp2Session>();
  server = createServer({ settings: { maxConcurrentStreams } });
  server.on('session', (s) => sessions.add(s));
  server.on('stream', (stream) => {
    stream.on('error', () => {});
    held.push(stream);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    held,
    sessions,
    release: () => {
      for (const s of held.splice(0)) s.respond({ ':status': 200 }, { endStream: true });
      for (const s of sessions) s.destroy();
    },
  };
}

describe('the HTTP/2 backend pool', () => {
  it('counts every stream opened while its session was being dialled: the backend limit is never exceeded', async () => {
    const backend = await holdingBackend(3);
    pool = new H2Backend({ origin: backend.origin, mode: 'h2c' });
    // Three requests arrive together: one dials, two wait for that dial; a fourth comes once they hold
    // their streams. The first session is full (3 of 3): the fourth must go to a new one.
    const opened = await Promise.all([pool.open(''), pool.open(''), pool.open('')]);
    const streams = opened.map((o) => {
      if (o === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
      const stream = o.session.request({ ':path': '/' });
      stream.on('close', o.release);
      return { session: o.session, stream };
    });
    const fourth = await pool.open('');
    if (fourth === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
    expect(new Set(streams.map((s) => s.session)).size).toBe(1);
    expect(fourth.session).not.toBe(streams[0]!.session);
    expect(pool.sessions).toBe(2);
    fourth.release();
    backend.release();
  });

  it('spreads requests that waited on one dial over new sessions once the first is full', async () => {
    const backend = await holdingBackend(2);
    pool = new H2Backend({ origin: backend.origin, mode: 'h2c', maxSessions: 4 });
    const opened = await Promise.all(Array.from({ length: 6 }, () => pool!.open('')));
    const bySession = new Map<unknown, number>();
    for (const o of opened) {
      if (o === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
      bySession.set(o.session, (bySession.get(o.session) ?? 0) + 1);
    }
    // Six streams, two per session: three sessions, none above the backend's limit.
    expect([...bySession.values()]).toEqual([2, 2, 2]);
    for (const o of opened) if (o !== 'http/1.1') o.release();
    backend.release();
  });

  it('a dial given up (the backend took TCP and sent no SETTINGS) closes its connection', async () => {
    let open = 0;
    const mute = createTcpServer((socket) => {
      open++;
      socket.on('error', () => {});
      socket.on('close', () => open--);
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    try {
      pool = new H2Backend({
        origin: `http://127.0.0.1:${(mute.address() as AddressInfo).port}`,
        mode: 'h2c',
        connectTimeoutMs: 100,
      });
      for (let i = 0; i < 3; i++) {
        await expect(pool.open('')).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      }
      await until(() => open === 0, { what: 'every timed-out dial closed', timeoutMs: 5_000 });
    } finally {
      mute.close();
    }
  });

  it('close() gives up a dial under way at once: its request fails and its connection closes', async () => {
    let open = 0;
    const mute = createTcpServer((socket) => {
      open++;
      socket.on('error', () => {});
      socket.on('close', () => open--);
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    try {
      const backend = new H2Backend({
        origin: `http://127.0.0.1:${(mute.address() as AddressInfo).port}`,
        mode: 'h2c',
      });
      const pending = backend.open('');
      await until(() => open === 1, { what: 'the dial connected', timeoutMs: 5_000 });
      backend.close();
      // Said by close(), not by the dial's timeout (10 s, its own message).
      await expect(pending).rejects.toThrow(/closing/);
      await until(() => open === 0, { what: 'the dial closed', timeoutMs: 5_000 });
    } finally {
      mute.close();
    }
  });

  it('the same for an https:// target that completes TLS (h2 by ALPN) and sends no SETTINGS', async () => {
    const certs = await makeCertificates();
    let open = 0;
    const mute = createTlsServer({ ...certs.selfSigned, ALPNProtocols: ['h2'] }, (socket) =>
      socket.on('error', () => {}),
    );
    mute.on('connection', (socket) => {
      open++;
      socket.on('error', () => {});
      socket.on('close', () => open--);
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    try {
      pool = new H2Backend({
        origin: `https://127.0.0.1:${(mute.address() as AddressInfo).port}`,
        mode: 'alpn',
        tls: { rejectUnauthorized: false, ca: undefined },
        connectTimeoutMs: 300,
      });
      for (let i = 0; i < 3; i++) {
        await expect(pool.open('')).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      }
      await until(() => open === 0, { what: 'every timed-out dial closed', timeoutMs: 5_000 });
    } finally {
      mute.close();
      await certs.dispose();
    }
  });
});
