import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { request } from 'node:http';
import { constants as h2 } from 'node:http2';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestReport } from '../src/forwarding/forward-options.js';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { send, sha256 } from './support/http-client.js';
import { silent, until } from './support/stack.js';

// A tunnel whose backend speaks HTTP/2 with prior knowledge (`--h2c`), reached by HTTP/1.1 public clients:
// streams, trailers, resets and errors cross the agent's HTTP/2 path (h2-exchange.ts, h2-backend.ts).

let backend: H2TestBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  backend = await startH2Backend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'h2c', h2c: true });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

const host = (): string => `h2c.localhost:${port}`;

describe('an h2c backend', () => {
  it('answers a GET over HTTP/2, with the Host the agent forwards as :authority', async () => {
    backend.routes.set('/hello', (stream, headers) => {
      stream.respond({ ':status': 200, 'content-type': 'text/plain', 'x-seen-scheme': headers[':scheme'] });
      stream.end(`hello ${headers[':method']} ${headers[':path']}`);
    });
    const res = await send({ port, path: '/hello?x=1', headers: ['host', host()] });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('hello GET /hello?x=1');
    expect(res.headers['x-seen-scheme']).toBe('http');
    const seen = backend.seen.at(-1)!;
    expect(seen[':authority']).toBe(`localhost:${backend.port}`);
    expect(seen['x-forwarded-host']).toBe(host());
    expect(tunnel.backendProtocol).toBe('h2c');
  });

  it('a field node:http2 takes once (user-agent, content-type) sent twice: the first goes on, as node:http keeps it', async () => {
    backend.routes.set('/twice', (stream, headers) => {
      stream.respond({ ':status': 200 });
      stream.end(`${headers['user-agent']} ${headers['content-type']}`);
    });
    const res = await send({
      port,
      path: '/twice',
      headers: [
        'host',
        host(),
        'user-agent',
        'first',
        'user-agent',
        'second',
        'content-type',
        'a/b',
        'content-type',
        'c/d',
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('first a/b');
  });

  it('streams a 4 MiB POST body to the backend and its echo back', async () => {
    backend.routes.set('/echo', (stream) => {
      stream.respond({ ':status': 200 });
      stream.pipe(stream);
    });
    const body = randomBytes(4 * 1024 * 1024);
    const res = await send({
      port,
      path: '/echo',
      method: 'POST',
      headers: ['host', host(), 'content-type', 'application/octet-stream'],
      body,
      keepBody: false,
    });
    expect(res.status).toBe(200);
    expect(res.length).toBe(body.length);
    expect(res.sha256).toBe(sha256(body));
    // Credit for the body's last bytes (written while the backend stream pushed back, then end()ed: no
    // 'drain' follows an end) is returned too, or the tunnel stream stays open and its bytes are lost to
    // the session's window for good.
    await until(() => tunnel.sessionStats?.openStreams === 0, { what: 'no open stream', timeoutMs: 5_000 });
  });

  it('Expect: 100-continue: the agent says 100 once the backend stream is open, and the body follows', async () => {
    backend.routes.set('/upload', (stream) => {
      stream.respond({ ':status': 200 });
      stream.pipe(stream);
    });
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/upload',
      method: 'POST',
      headers: { host: host(), expect: '100-continue', 'content-length': '5' },
      agent: false,
    });
    req.on('continue', () => req.end('hello'));
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    let body = '';
    for await (const chunk of res) body += String(chunk);
    expect(body).toBe('hello');
  });

  it("passes the backend's trailers on: an HTTP/1.1 client reads them as chunked trailers", async () => {
    backend.routes.set('/trailers', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () =>
        stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'ok', 'x-bin-bin': 'AAEC' }),
      );
      stream.end(Buffer.from([0, 0, 0, 0, 2, 8, 1]));
    });
    const res = await send({ port, path: '/trailers', headers: ['host', host()] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(Buffer.from([0, 0, 0, 0, 2, 8, 1]));
    expect(res.trailers).toMatchObject({ 'grpc-status': '0', 'grpc-message': 'ok', 'x-bin-bin': 'AAEC' });
  });

  it('passes a trailers-only answer (one HEADERS with END_STREAM) on as a bodiless response', async () => {
    backend.routes.set('/trailers-only', (stream) => {
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'nope' },
        { endStream: true },
      );
    });
    const reported = new Promise<RequestReport>((resolve) => {
      const listener = (report: RequestReport): void => {
        if (report.path !== '/trailers-only') return;
        tunnel.off('request', listener);
        resolve(report);
      };
      tunnel.on('request', listener);
    });
    const res = await send({ port, path: '/trailers-only', headers: ['host', host()] });
    // The request line: a complete exchange, not one cut short.
    const report = await reported;
    expect(report.status).toBe(200);
    expect(report.error).toBeUndefined();
    expect(res.status).toBe(200);
    expect(res.headers['grpc-status']).toBe('5');
    expect(res.headers['grpc-message']).toBe('nope');
    expect(res.length).toBe(0);
  });

  it('sends te: trailers with a gRPC call and never a connection-specific field', async () => {
    backend.routes.set('/pkg.Svc/Unary', (stream, headers) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-te': String(headers.te) });
      stream.end();
    });
    const res = await send({
      port,
      path: '/pkg.Svc/Unary',
      method: 'POST',
      headers: ['host', host(), 'content-type', 'application/grpc+proto', 'grpc-timeout', '5S'],
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    expect(res.headers['x-te']).toBe('trailers');
    const seen = backend.seen.at(-1)!;
    // The edge passes on the time left of the client's 5 s (its deadline counts from the call's arrival).
    const timeout = /^(\d{1,8})([HMSmun])$/.exec(String(seen['grpc-timeout']));
    const perUnit: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
    const leftMs = Number(timeout?.[1]) * (perUnit[timeout?.[2] ?? ''] ?? Number.NaN);
    expect(leftMs).toBeLessThanOrEqual(5000);
    expect(leftMs).toBeGreaterThan(1000);
    expect(seen.connection).toBeUndefined();
  });

  it('multiplexes 64 concurrent requests over few backend connections', async () => {
    backend.routes.set('/many', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    const before = backend.sessions;
    const answers = await Promise.all(
      Array.from({ length: 64 }, () => send({ port, path: '/many', headers: ['host', host()] })),
    );
    expect(answers.every((r) => r.status === 200 && r.body.toString() === 'ok')).toBe(true);
    // The pool spreads streams over a new session only past 100 on each: all 64 shared one connection.
    expect(backend.sessions).toBe(Math.max(before, 1));
  });

  it('a client that goes away makes the backend see RST_STREAM CANCEL', async () => {
    const closed = new Promise<number>((resolve) => {
      backend.routes.set('/hang', (stream) => {
        stream.respond({ ':status': 200 });
        stream.write('first');
        stream.on('close', () => resolve(stream.rstCode ?? -1));
      });
    });
    const req = request({ host: '127.0.0.1', port, path: '/hang', headers: { host: host() }, agent: false });
    req.on('error', () => {});
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    await once(res, 'data');
    req.destroy();
    expect(await closed).toBe(h2.NGHTTP2_CANCEL);
  });

  it('200 clients that go away mid-response: every backend stream is cancelled and none is left counted', async () => {
    let open = 0;
    let cancelled = 0;
    backend.routes.set('/abandoned', (stream) => {
      open++;
      stream.respond({ ':status': 200 });
      stream.write('first');
      stream.on('close', () => {
        if (stream.rstCode === h2.NGHTTP2_CANCEL) cancelled++;
      });
    });
    const clients = Array.from({ length: 200 }, () => {
      const req = request({
        host: '127.0.0.1',
        port,
        path: '/abandoned',
        headers: { host: host() },
        agent: false,
      });
      req.on('error', () => {});
      req.end();
      return req;
    });
    await until(() => open === 200);
    // 200 streams at once took two connections (a new one past 100 streams on each).
    const sessionsBefore = backend.sessions;
    for (const req of clients) req.destroy();
    await until(() => cancelled === 200);
    // Had the pool kept counting them, the next 150 at once would have needed a third connection.
    backend.routes.set('/after', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    const answers = await Promise.all(
      Array.from({ length: 150 }, () => send({ port, path: '/after', headers: ['host', host()] })),
    );
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(backend.sessions).toBe(sessionsBefore);
  });

  it("a backend's RST_STREAM mid-response aborts the client's response", async () => {
    backend.routes.set('/reset', (stream) => {
      stream.respond({ ':status': 200 });
      // destroy(err) resets at once (INTERNAL_ERROR); close(code) would first end the body cleanly.
      stream.write('part', () => stream.destroy(new Error('backend fails mid-response')));
    });
    await expect(send({ port, path: '/reset', headers: ['host', host()] })).rejects.toThrow(
      /aborted|before it was complete|socket hang up/,
    );
  });
});

describe('a backend connection lost under a request', () => {
  it('an idempotent request without a body is sent again on a new connection', async () => {
    let calls = 0;
    backend.routes.set('/flaky', (stream) => {
      calls++;
      // The first time the whole connection goes, as a backend closing an idle one at that moment would.
      if (calls === 1) stream.session?.destroy();
      else {
        stream.respond({ ':status': 200 });
        stream.end('second try');
      }
    });
    const res = await send({ port, path: '/flaky', headers: ['host', host()] });
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('second try');
    expect(calls).toBe(2);
  });

  it('a backend that says GOAWAY (a graceful restart): its stream finishes, the next request gets a new connection', async () => {
    backend.routes.set('/bye', (stream) => {
      // GOAWAY with the last stream id this one: it is answered, nothing more is taken on this connection.
      stream.session?.close();
      stream.respond({ ':status': 200 });
      stream.end('bye');
    });
    backend.routes.set('/next', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('next');
    });
    // A live connection first (earlier tests may have ended theirs): /bye goes out on it.
    await send({ port, path: '/next', headers: ['host', host()] });
    const before = backend.sessions;
    const bye = await send({ port, path: '/bye', headers: ['host', host()] });
    expect(bye.body.toString()).toBe('bye');
    const next = await send({ port, path: '/next', headers: ['host', host()] });
    expect(next.body.toString()).toBe('next');
    expect(backend.sessions).toBe(before + 1);
  });

  it('a POST, and a gRPC call, are not: the client is told the backend closed the connection', async () => {
    let calls = 0;
    backend.routes.set('/lost', (stream) => {
      calls++;
      stream.session?.destroy();
    });
    const post = await send({
      port,
      path: '/lost',
      method: 'POST',
      headers: ['host', host()],
      body: Buffer.from('once'),
    });
    expect(post.status).toBe(502);
    expect(post.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_CLOSED');
    const grpc = await send({
      port,
      path: '/lost',
      method: 'POST',
      headers: ['host', host(), 'content-type', 'application/grpc'],
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    expect(grpc.headers['grpc-status']).toBe('14');
    expect(grpc.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_CLOSED');
    expect(calls).toBe(2);
  });
});

describe('a backend that resets a stream before answering', () => {
  it('a response head larger than HTTP/2 lets through: 502 naming it, not a failure of the tunnel', async () => {
    backend.routes.set('/big-head', (stream) => {
      stream.respond({ ':status': 200, 'x-a': 'a'.repeat(40_000), 'x-b': 'b'.repeat(40_000) });
      stream.end('x');
    });
    const res = await send({ port, path: '/big-head', headers: ['host', host()] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_INVALID_RESPONSE');
    expect(res.body.toString()).toMatch(/FRAME_SIZE_ERROR/);
  });

  it('INTERNAL_ERROR before the head: 502 saying the backend reset it, and UNAVAILABLE for a gRPC call', async () => {
    backend.routes.set('/crash', (stream) => stream.close(h2.NGHTTP2_INTERNAL_ERROR));
    const res = await send({ port, path: '/crash', headers: ['host', host()] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_CLOSED');
    expect(res.body.toString()).toMatch(/reset the stream before answering \(HTTP\/2 INTERNAL_ERROR\)/);
    const grpc = await send({
      port,
      path: '/crash',
      method: 'POST',
      headers: ['host', host(), 'content-type', 'application/grpc'],
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    expect(grpc.headers['grpc-status']).toBe('14');
  });
});

describe('a backend that answers before it read the request body', () => {
  it('the rest of the upload is taken and dropped, so the tunnel stream closes (no credit left owed)', async () => {
    backend.routes.set('/early', (stream) => {
      // Reads nothing: the upload fills the backend stream's window, then its answer ends the stream.
      stream.pause();
      setTimeout(() => {
        stream.respond({ ':status': 200 });
        stream.end('early answer');
      }, 200);
    });
    const res = await send({
      port,
      path: '/early',
      method: 'POST',
      headers: ['host', host(), 'content-type', 'application/octet-stream'],
      body: Buffer.alloc(4 * 1024 * 1024, 3),
      timeoutMs: 10_000,
    });
    expect(res.body.toString()).toBe('early answer');
    await until(() => tunnel.sessionStats?.openStreams === 0, { what: 'no open stream', timeoutMs: 5_000 });
  });
});

describe('slow readers', () => {
  it('a client that reads nothing stops the backend within a bounded amount', async () => {
    let accepted = 0;
    let stalledAt = 0;
    backend.routes.set('/flood', (stream) => {
      stream.respond({ ':status': 200 });
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = (): void => {
        // 256 MiB offered: far more than any buffer on the way may hold.
        while (accepted < 256 * 1024 * 1024) {
          accepted += chunk.length;
          if (!stream.write(chunk)) {
            stalledAt = accepted;
            stream.once('drain', pump);
            return;
          }
        }
        stream.end();
      };
      pump();
    });
    const req = request({ host: '127.0.0.1', port, path: '/flood', headers: { host: host() }, agent: false });
    req.on('error', () => {});
    req.end();
    const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
    res.pause();
    // Stalled: the backend's writes stop being taken; wait until the count holds still for a while.
    let last = -1;
    let still = 0;
    await until(() => {
      still = accepted === last && stalledAt === accepted ? still + 1 : 0;
      last = accepted;
      return still >= 60;
    });
    expect(accepted).toBeLessThan(32 * 1024 * 1024);
    req.destroy();
  });

  it('a backend that reads nothing stops the client upload within a bounded amount', async () => {
    let backendStream: import('node:http2').ServerHttp2Stream | undefined;
    backend.routes.set('/sink', (stream) => {
      backendStream = stream;
      stream.pause();
    });
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/sink',
      method: 'POST',
      headers: { host: host(), 'content-type': 'application/octet-stream' },
      agent: false,
    });
    req.on('error', () => {});
    let written = 0;
    let stalled = false;
    const chunk = Buffer.alloc(64 * 1024, 2);
    const pump = (): void => {
      while (written < 256 * 1024 * 1024) {
        written += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          stalled = true;
          return;
        }
      }
      req.end();
    };
    pump();
    let last = -1;
    let still = 0;
    await until(() => {
      still = written === last && stalled ? still + 1 : 0;
      last = written;
      return still >= 60;
    });
    expect(backendStream).toBeDefined();
    expect(written).toBeLessThan(32 * 1024 * 1024);
    req.destroy();
  });
});
