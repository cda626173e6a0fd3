import { once } from 'node:events';
import { request } from 'node:http';
import { createServer, type Http2Server, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { buildEdge } from '@tunnel2/edge';
import { TestServiceClient } from '@tunnel2/test-backend/grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { H2Backend } from '../src/forwarding/http2/h2-backend.js';
import { resolveKeepalive } from '../src/forwarding/http2/h2-keepalive.js';
import { connect } from '../src/index.js';
import { startH2Backend } from './support/h2-backend.js';
import { send } from './support/http-client.js';
import { spawnNode } from './support/processes.js';
import { silent, until } from './support/stack.js';

// Keep-alive PINGs on the agent's HTTP/2 backend sessions (h2-keepalive.ts), and a backend's GOAWAY: a
// backend that stops answering (SIGSTOP: its connections stay open, nothing is read) must not leave a
// request waiting for good, a healthy idle session must not be closed by the PINGs, and a backend that
// says GOAWAY finishes what it has while new requests go to a new session.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const grpcServerScript = fileURLToPath(new URL('./support/grpc-server-process.mjs', import.meta.url));

describe('keep-alive PINGs on a pooled backend session', () => {
  it('a healthy idle session answers them and stays: the next stream goes on the same session', async () => {
    let pings = 0;
    const sessions = new Set<ServerHttp2Session>();
    const server: Http2Server = createServer();
    server.on('session', (session) => {
      sessions.add(session);
      session.on('ping', () => pings++);
    });
    server.on('stream', (stream: ServerHttp2Stream) =>
      stream.respond({ ':status': 200 }, { endStream: true }),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(async () => {
      const closed = once(server, 'close');
      server.close();
      for (const session of sessions) session.destroy();
      await closed;
    });
    const pool = new H2Backend({
      origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      mode: 'h2c',
      keepalive: { intervalMs: 20, timeoutMs: 5_000 },
    });
    cleanups.push(() => pool.close());
    const first = await pool.open('');
    if (first === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
    first.release();
    await until(() => pings >= 5, { what: 'five PINGs on the idle session', timeoutMs: 10_000 });
    const next = await pool.open('');
    if (next === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
    next.release();
    expect(next.session).toBe(first.session);
    expect(pool.sessions).toBe(1);
    expect(sessions.size).toBe(1);
    expect([...sessions][0]!.closed).toBe(false);
  });
});

describe('a backend that stops answering (SIGSTOP)', () => {
  it('a gRPC call on its session gets UNAVAILABLE (14) naming the PING once it times out; after SIGCONT the next call is served on a new session', async () => {
    const backend = spawnNode([grpcServerScript]);
    cleanups.push(() => {
      backend.kill('SIGCONT');
      backend.kill('SIGKILL');
      return backend.exited;
    });
    const backendPort = Number((await backend.waitFor('listening')).port);
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const tunnel = await connect({
      target: backendPort,
      server: url,
      subdomain: 'stopped',
      h2c: true,
      // Small, so the test waits about a second for the verdict (the defaults: 310 s and 20 s); the timeout
      // long enough that the call reaches the agent before the stopped backend's session is given up.
      backendKeepalive: { intervalMs: 200, timeoutMs: 1_000 },
      backendConnectTimeoutMs: 1_000,
    });
    cleanups.push(() => tunnel.close(0));
    const client = new TestServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), {
      'grpc.default_authority': `stopped.localhost:${port}`,
    });
    cleanups.push(() => client.client.close());

    const served = await client.unary('Echo', { message: 'before' }).outcome;
    expect(served.error).toBeUndefined();

    backend.kill('SIGSTOP');
    const stoppedAt = performance.now();
    const { error } = await client.unary('Echo', { message: 'while stopped' }).outcome;
    expect(error?.code).toBe(14);
    expect(error?.details).toMatch(/stopped answering: the backend left a PING unanswered for 1 s/);
    // At most an interval and a timeout (1.2 s) after the stop; the bound is generous for a loaded machine,
    // and far below "never", which is what the call got without the PINGs.
    expect(performance.now() - stoppedAt).toBeLessThan(10_000);

    backend.kill('SIGCONT');
    const after = await client.unary('Echo', { message: 'after' }).outcome;
    expect(after.error).toBeUndefined();
    expect(after.reply?.message).toBe('after');
  });
});

describe('a backend that says GOAWAY while a response is under way', () => {
  it('the response in flight finishes on the old session; a request meanwhile goes to a new one', async () => {
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'goaway', h2c: true });
    cleanups.push(() => tunnel.close(0));
    const host = `goaway.localhost:${port}`;
    let held: ServerHttp2Stream | undefined;
    backend.routes.set('/held', (stream) => {
      // GOAWAY naming this stream as the last one taken, before its head: by the time the head reaches the
      // client, the agent has read the GOAWAY (one connection, in order).
      stream.session?.goaway(0, stream.id);
      stream.respond({ ':status': 200 });
      stream.write('first ');
      held = stream;
    });
    backend.routes.set('/next', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('next');
    });
    const before = backend.sessions;
    const body = new Promise<string>((resolve, reject) => {
      const req = request({ port, path: '/held', headers: { host }, agent: false });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (text === 'first ') void nextThenRelease();
        });
        res.on('end', () => resolve(text));
        res.on('error', reject);
      });
      req.end();
    });
    let next: string | undefined;
    const nextThenRelease = async (): Promise<void> => {
      next = (await send({ port, path: '/next', headers: ['host', host] })).body.toString();
      held?.end('last');
    };
    expect(await body).toBe('first last');
    expect(next).toBe('next');
    // The held stream's session, and a new one for /next.
    expect(backend.sessions).toBe(before + 2);
  });
});

/** An HTTP/2 frame: 9-byte header (length, type, flags, stream id), then the payload. */
function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

describe('a busy session whose backend answers PINGs late', () => {
  it('is kept while its response DATA keeps coming: only a silent session is given up', async () => {
    // A backend written here, byte by byte, that never acknowledges a PING (as one whose PING ACKs queue
    // behind seconds of DATA on a slow link) but streams its answer steadily: alive, just slow to answer.
    const sockets = new Set<Socket>();
    const server = createNetServer((socket) => {
      sockets.add(socket);
      let buffered = Buffer.alloc(0);
      let prefaceRead = false;
      socket.write(frame(0x4, 0, 0));
      socket.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (!prefaceRead) {
          if (buffered.length < 24) return;
          buffered = buffered.subarray(24);
          prefaceRead = true;
        }
        while (buffered.length >= 9) {
          const length = buffered.readUIntBE(0, 3);
          if (buffered.length < 9 + length) return;
          const [type, flags] = [buffered[3]!, buffered[4]!];
          const streamId = buffered.readUInt32BE(5) & 0x7fffffff;
          buffered = buffered.subarray(9 + length);
          if (type === 0x4 && (flags & 0x1) === 0) socket.write(frame(0x4, 0x1, 0));
          if (type === 0x1) {
            // :status 200 (HPACK static table index 8), then 30 chunks 40 ms apart (1.2 s in all).
            socket.write(frame(0x1, 0x4, streamId, Buffer.from([0x88])));
            let sent = 0;
            const tick = setInterval(() => {
              sent++;
              socket.write(frame(0x0, sent === 30 ? 0x1 : 0, streamId, Buffer.alloc(100, 0x61)));
              if (sent === 30) clearInterval(tick);
            }, 40);
            socket.once('close', () => clearInterval(tick));
          }
        }
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    });
    const pool = new H2Backend({
      origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      mode: 'h2c',
      keepalive: { intervalMs: 50, timeoutMs: 200 },
    });
    cleanups.push(() => pool.close());
    const opened = await pool.open('');
    if (opened === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
    const stream = opened.session.request({ ':path': '/slow' });
    stream.once('close', opened.release);
    let bytes = 0;
    stream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    const outcome = await new Promise<string>((resolve) => {
      stream.on('error', (err) => resolve(`error: ${err.message}`));
      stream.on('end', () => resolve('end'));
    });
    expect(outcome).toBe('end');
    expect(bytes).toBe(3_000);
    expect(opened.session.destroyed).toBe(false);
  });
});

describe('backendKeepalive, the option', () => {
  it('refuses a time setTimeout cannot wait (it would fire at once: every session killed by its first PING)', () => {
    expect(() => resolveKeepalive({ timeoutMs: 3_000_000_000 })).toThrow(/at most 2147483647/);
    expect(() => resolveKeepalive({ intervalMs: 2 ** 31 })).toThrow(/at most 2147483647/);
    expect(resolveKeepalive({ intervalMs: 2 ** 31 - 1 })).toEqual({
      intervalMs: 2 ** 31 - 1,
      timeoutMs: 20_000,
    });
  });

  it("by default PINGs no more often than gRPC servers' own policy allows (grpc-go, grpc-java: one per 5 min)", () => {
    // A 30 s default made a grpc-go server answer GOAWAY too_many_pings after three PINGs on a quiet call
    // (a server-streaming watch), cutting the call every minute or two.
    const settings = resolveKeepalive(undefined);
    expect(settings).not.toBe(false);
    expect(settings === false ? 0 : settings.intervalMs).toBeGreaterThan(5 * 60_000);
  });

  it('false turns the PINGs off (a backend whose PING policy would close its connections)', async () => {
    expect(resolveKeepalive(false)).toBe(false);
    const pingsBy = new Map<number, number>();
    const sessions = new Set<ServerHttp2Session>();
    const server: Http2Server = createServer();
    server.on('session', (session) => {
      sessions.add(session);
      const port = session.socket.remotePort ?? 0;
      session.on('ping', () => pingsBy.set(port, (pingsBy.get(port) ?? 0) + 1));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(async () => {
      const closed = once(server, 'close');
      server.close();
      for (const session of sessions) session.destroy();
      await closed;
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const on = new H2Backend({ origin, mode: 'h2c', keepalive: { intervalMs: 10, timeoutMs: 5_000 } });
    const off = new H2Backend({ origin, mode: 'h2c', keepalive: false });
    cleanups.push(
      () => on.close(),
      () => off.close(),
    );
    const quiet = await off.open('');
    const pinging = await on.open('');
    if (quiet === 'http/1.1' || pinging === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
    quiet.release();
    pinging.release();
    // The pinging pool as the clock: by its fifth PING the other has had time for as many.
    const onPort = pinging.session.socket.localPort ?? 0;
    await until(() => (pingsBy.get(onPort) ?? 0) >= 5, {
      what: 'five PINGs with PINGs on',
      timeoutMs: 10_000,
    });
    expect(pingsBy.get(quiet.session.socket.localPort ?? 0) ?? 0).toBe(0);
  });
});

describe("a backend that says GOAWAY 'too_many_pings' (grpc-go's, grpc-java's PING policy)", () => {
  it('the next sessions PING half as often, as grpc-go clients back off, until the backend stops objecting', async () => {
    const sessions = new Set<ServerHttp2Session>();
    let objections = 0;
    const server: Http2Server = createServer();
    server.on('session', (session) => {
      sessions.add(session);
      // As grpc-go's server says it (ENHANCE_YOUR_CALM, debug data "too_many_pings"), at the first PING.
      session.once('ping', () => {
        objections++;
        session.goaway(11, 0, Buffer.from('too_many_pings'));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(async () => {
      const closed = once(server, 'close');
      server.close();
      for (const session of sessions) session.destroy();
      await closed;
    });
    const pool = new H2Backend({
      origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      mode: 'h2c',
      keepalive: { intervalMs: 20, timeoutMs: 5_000 },
    });
    cleanups.push(() => pool.close());
    for (const expected of [40, 80]) {
      const opened = await pool.open('');
      if (opened === 'http/1.1') throw new Error('h2c never chooses HTTP/1.1');
      opened.release();
      await until(() => opened.session.closed || opened.session.destroyed, {
        what: 'the session closed by its GOAWAY',
        timeoutMs: 10_000,
      });
      expect(pool.keepaliveIntervalMs).toBe(expected);
    }
    expect(objections).toBe(2);
  });
});
