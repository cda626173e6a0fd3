import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect as netConnect } from 'node:net';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { buildEdge, type Edge, installRequestIds } from '@tunnel2/edge';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c, h2Request } from './support/h2-client.js';
import { silent } from './support/stack.js';

// HTTP/2 on the edge's plain port (h2c with prior knowledge): requests reach an HTTP/1.1 backend through a
// real agent exactly as HTTP/1.1 requests do, and the answer is written back as HTTP/2.

const run = promisify(execFile);

interface Seen {
  method: string;
  url: string;
  headers: string[];
}

let backend: Server;
let edge: Edge;
let port: number;
const tunnels: Tunnel[] = [];
/** Requests the backend saw that ended without their body completing (the client went away). */
const cancelled: string[] = [];
let onCancel: (() => void) | undefined;
let onHang: (() => void) | undefined;
/** Answers the last request /hang holds. */
let releaseHang: (() => void) | undefined;

function seen(req: IncomingMessage): Seen {
  return { method: req.method ?? '', url: req.url ?? '', headers: req.rawHeaders };
}

beforeAll(async () => {
  backend = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/head') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(seen(req)));
    } else if (path === '/echo') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      req.pipe(res);
    } else if (path === '/trailers') {
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
      res.write('part one,');
      res.write('part two');
      res.addTrailers({ 'x-checksum': 'sha256-abc', 'grpc-status': '0' });
      res.end();
    } else if (path === '/hints') {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      res.end('after hints');
    } else if (path === '/hang') {
      res.on('close', () => {
        if (!res.writableFinished) {
          cancelled.push(req.url ?? '');
          onCancel?.();
        }
      });
      releaseHang = () => res.end('released');
      onHang?.();
    } else {
      res.statusCode = 404;
      res.end('no such fixture');
    }
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const target = (backend.address() as AddressInfo).port;
  edge = buildEdge({ port: 0, logger: silent });
  installRequestIds(edge, silent);
  ({ port } = await edge.listen());
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'web' }));
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'locked', basicAuth: 'ann:s3cret' }));
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'walled', allowIps: ['10.0.0.0/8'] }));
});

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => backend.close(resolve));
});

function field(headers: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2)
    if (headers[i]!.toLowerCase() === name) out.push(headers[i + 1]!);
  return out;
}

describe('h2c with prior knowledge on the plain port', () => {
  it('routes by :authority; the backend sees host first, no pseudo-header, forwarding fields and an id', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/head?x=1',
      ':authority': `web.localhost:${port}`,
      'x-custom': 'kept',
    });
    session.close();
    expect(answer.status).toBe(200);
    const head = JSON.parse(answer.body.toString()) as Seen;
    expect(head.method).toBe('GET');
    expect(head.url).toBe('/head?x=1');
    expect(head.headers[0]!.toLowerCase()).toBe('host');
    expect(head.headers.filter((_, i) => i % 2 === 0 && head.headers[i]!.startsWith(':'))).toEqual([]);
    expect(field(head.headers, 'x-custom')).toEqual(['kept']);
    expect(field(head.headers, 'x-forwarded-proto')).toEqual(['http']);
    expect(field(head.headers, 'x-forwarded-host')).toEqual([`web.localhost:${port}`]);
    expect(field(head.headers, 'x-forwarded-for')[0]).toMatch(/127\.0\.0\.1/);
    expect(field(head.headers, 'x-request-id')).toHaveLength(1);
  });

  it('joins Cookie crumbs into one field for the HTTP/1.1 backend (RFC 9113 §8.2.3)', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/head',
      ':authority': `web.localhost:${port}`,
      cookie: ['a=1', 'b=2', 'c=3'],
    });
    session.close();
    const head = JSON.parse(answer.body.toString()) as Seen;
    expect(field(head.headers, 'cookie')).toEqual(['a=1; b=2; c=3']);
  });

  it('routes by path (/session/<name>/) with the prefix stated', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/session/web/head',
      ':authority': `localhost:${port}`,
    });
    session.close();
    expect(answer.status).toBe(200);
    const head = JSON.parse(answer.body.toString()) as Seen;
    expect(head.url).toBe('/head');
    expect(field(head.headers, 'x-forwarded-prefix')).toEqual(['/session/web']);
  });

  it('streams a POST body in and back out, many streams on one connection', async () => {
    const session = h2c(port);
    const chunks = Array.from({ length: 20 }, (_, i) => Buffer.alloc(16 * 1024, i));
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        h2Request(
          session,
          { ':method': 'POST', ':path': '/echo', ':authority': `web.localhost:${port}` },
          { body: chunks },
        ),
      ),
    );
    session.close();
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.body.equals(Buffer.concat(chunks))).toBe(true);
    }
  });

  it('passes the response trailers to the client as HTTP/2 trailers', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, { ':path': '/trailers', ':authority': `web.localhost:${port}` });
    session.close();
    expect(answer.body.toString()).toBe('part one,part two');
    expect(answer.trailers?.['x-checksum']).toBe('sha256-abc');
    expect(answer.trailers?.['grpc-status']).toBe('0');
    expect(answer.headers.trailer).toBeUndefined();
  });

  it('carries a request with trailers through (body intact)', async () => {
    const session = h2c(port);
    const answer = await h2Request(
      session,
      { ':method': 'POST', ':path': '/echo', ':authority': `web.localhost:${port}` },
      { body: ['hello ', 'trailers'], trailers: { 'x-request-sum': '42' } },
    );
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('hello trailers');
  });

  it('relays 103 Early Hints as an interim HEADERS frame', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, { ':path': '/hints', ':authority': `web.localhost:${port}` });
    session.close();
    expect(answer.interim.map((h) => h[':status'])).toEqual([103]);
    expect(answer.interim[0]?.link).toBe('</style.css>; rel=preload; as=style');
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('after hints');
  });

  it("Expect: 100-continue: the backend's 100 reaches the client before it sends the body", async () => {
    const session = h2c(port);
    const stream = session.request({
      ':method': 'POST',
      ':path': '/echo',
      ':authority': `web.localhost:${port}`,
      expect: '100-continue',
    });
    stream.on('error', () => {});
    await new Promise((resolve) => stream.once('continue', resolve));
    stream.end('sent after 100');
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    await new Promise((resolve) => stream.once('end', resolve));
    session.close();
    expect(Buffer.concat(chunks).toString()).toBe('sent after 100');
  });

  it('an Expect other than 100-continue is answered 417 (as Node answered it), never sent on', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/head',
      ':authority': `web.localhost:${port}`,
      expect: 'something-else',
    });
    session.close();
    expect(answer.status).toBe(417);
  });

  it('a client RST_STREAM cancels the backend request', async () => {
    const session = h2c(port);
    const backendSawCancel = new Promise<void>((resolve) => {
      onCancel = resolve;
    });
    const arrived = new Promise<void>((resolve) => {
      onHang = resolve;
    });
    const stream = session.request({ ':path': '/hang?rst', ':authority': `web.localhost:${port}` });
    stream.on('error', () => {});
    await arrived;
    stream.close(0x8);
    await backendSawCancel;
    session.close();
    expect(cancelled).toContain('/hang?rst');
  });

  it('basic auth and the IP allowlist apply as on HTTP/1.1', async () => {
    const session = h2c(port);
    const locked = await h2Request(session, { ':path': '/head', ':authority': `locked.localhost:${port}` });
    expect(locked.status).toBe(401);
    expect(locked.headers['www-authenticate']).toMatch(/Basic/);
    const open = await h2Request(session, {
      ':path': '/head',
      ':authority': `locked.localhost:${port}`,
      authorization: `Basic ${Buffer.from('ann:s3cret').toString('base64')}`,
    });
    expect(open.status).toBe(200);
    const walled = await h2Request(session, { ':path': '/head', ':authority': `walled.localhost:${port}` });
    expect(walled.status).toBe(403);
    session.close();
  });

  it("answers an unknown tunnel with the edge 404, and the edge's own host with its landing page", async () => {
    const session = h2c(port);
    const answer = await h2Request(session, { ':path': '/', ':authority': `nobody.localhost:${port}` });
    const landing = await h2Request(session, { ':path': '/', ':authority': `localhost:${port}` });
    const notTunnel = await h2Request(session, { ':path': '/nothing', ':authority': `localhost:${port}` });
    session.close();
    expect(answer.status).toBe(404);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(landing.status).toBe(200);
    expect(landing.body.toString()).toContain('tunnel2 edge');
    expect(notTunnel.status).toBe(404);
    expect(notTunnel.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
  });

  it('CONNECT is refused with 405; RFC 8441 extended CONNECT is announced (e2e-h2-websocket.test.ts)', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, { ':method': 'CONNECT', ':authority': 'example.com:443' });
    expect(answer.status).toBe(405);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_METHOD_NOT_ALLOWED');
    expect(session.remoteSettings.enableConnectProtocol).toBe(true);
    session.close();
  });

  it('gathers a preface split over several reads, and HTTP/1.1 keeps working on the same port', async () => {
    const socket = netConnect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
    // The preface in three writes, each flushed before the next, then an empty SETTINGS frame.
    for (const part of [preface.subarray(0, 3), preface.subarray(3, 17), preface.subarray(17)]) {
      await new Promise<void>((resolve) => socket.write(part, () => resolve()));
      await new Promise((resolve) => setImmediate(resolve));
    }
    socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
    // The edge answers with its own SETTINGS frame (type 4): it took the connection as HTTP/2.
    const first = await new Promise<Buffer>((resolve) => socket.once('data', resolve));
    socket.destroy();
    expect(first[3]).toBe(4);
    const res = await fetch(`http://127.0.0.1:${port}/session/web/head`);
    expect(res.status).toBe(200);
  });

  it('body limits: a declared length over maxRequestBodyBytes, and a streamed body past it, get 413', async () => {
    const small = buildEdge({ port: 0, logger: silent, maxRequestBodyBytes: 1000 });
    const { port: smallPort } = await small.listen();
    const agent = await connect({
      target: (backend.address() as AddressInfo).port,
      server: small.url,
      subdomain: 'tight',
    });
    try {
      const session = h2c(smallPort);
      const authority = `tight.localhost:${smallPort}`;
      const declared = await h2Request(
        session,
        { ':method': 'POST', ':path': '/echo', ':authority': authority, 'content-length': '5000' },
        { body: [Buffer.alloc(5000)] },
      );
      expect(declared.status).toBe(413);
      expect(declared.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BODY_TOO_LARGE');
      const streamed = await h2Request(
        session,
        { ':method': 'POST', ':path': '/echo', ':authority': authority },
        { body: Array.from({ length: 10 }, () => Buffer.alloc(400)) },
      );
      expect([413, 200]).toContain(streamed.status);
      // Either the 413 came first, or the echo began and was cut short: never 4,000 bytes echoed whole.
      if (streamed.status === 413)
        expect(streamed.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BODY_TOO_LARGE');
      else expect(streamed.body.length).toBeLessThan(4000);
      const fine = await h2Request(
        session,
        { ':method': 'POST', ':path': '/echo', ':authority': authority },
        { body: ['small'] },
      );
      expect(fine.body.toString()).toBe('small');
      session.close();
    } finally {
      await agent.close(0);
      await small.close(0);
    }
  });

  it('the drain: GOAWAY at once, the stream in flight finishes within the grace', async () => {
    const draining = buildEdge({ port: 0, logger: silent });
    const { port: drainPort } = await draining.listen();
    const agent = await connect({
      target: (backend.address() as AddressInfo).port,
      server: draining.url,
      subdomain: 'leaving',
    });
    const session = h2c(drainPort);
    const goaway = new Promise((resolve) => session.once('goaway', resolve));
    const arrived = new Promise<void>((resolve) => {
      onHang = resolve;
    });
    const answer = h2Request(session, {
      ':path': '/hang?drain',
      ':authority': `leaving.localhost:${drainPort}`,
    });
    await arrived;
    const closed = draining.close(10_000);
    await goaway;
    releaseHang?.();
    const done = await answer;
    expect(done.status).toBe(200);
    expect(done.body.toString()).toBe('released');
    await closed;
    await agent.close(0);
  });

  it("the access log names an HTTP/2 answer's edge error, as on HTTP/1.1", async () => {
    const lines: { msg: string; status?: number; edgeError?: string; url?: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done): void {
        for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line));
        done();
      },
    });
    const logged = buildEdge({ port: 0, logger: silent });
    installRequestIds(logged, pino({ level: 'debug' }, sink));
    const { port: loggedPort } = await logged.listen();
    try {
      const session = h2c(loggedPort);
      // An edge page with a body (head, body and end in one tick), and a gRPC answer that is a head alone.
      const page = await h2Request(session, {
        ':path': '/page',
        ':authority': `nobody.localhost:${loggedPort}`,
      });
      const call = await h2Request(session, {
        ':method': 'POST',
        ':path': '/pkg.Svc/Call',
        ':authority': `nobody.localhost:${loggedPort}`,
        'content-type': 'application/grpc',
      });
      // The edge's own 404 (Fastify's, over Node's compatibility objects).
      const own = await h2Request(session, { ':path': '/own', ':authority': `localhost:${loggedPort}` });
      session.close();
      expect(page.status).toBe(404);
      expect(call.headers['grpc-status']).toBeDefined();
      await expect.poll(() => lines.filter((line) => line.edgeError !== undefined).length).toBe(3);
      expect(lines.find((line) => line.url === '/own')?.edgeError).toBe(own.headers['x-tunnel2-error']);
      expect(lines.find((line) => line.url === '/own')?.status).toBe(404);
      expect(lines.find((line) => line.url === '/page')?.edgeError).toBe(page.headers['x-tunnel2-error']);
      expect(lines.find((line) => line.url === '/pkg.Svc/Call')?.edgeError).toBe(
        call.headers['x-tunnel2-error'],
      );
    } finally {
      await logged.close(0);
    }
  });

  it('closes a connection that stalls inside the preface after the headers timeout', async () => {
    const quick = buildEdge({ port: 0, logger: silent, headersTimeoutMs: 300 });
    const { port: quickPort } = await quick.listen();
    try {
      const socket = netConnect(quickPort, '127.0.0.1');
      socket.on('error', () => {});
      socket.write('PRI * HTTP');
      const got: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => got.push(chunk));
      await new Promise((resolve) => socket.once('close', resolve));
      expect(Buffer.concat(got).length).toBe(0);
    } finally {
      await quick.close(0);
    }
  });

  it('nghttp -v: a response without trailers ends on its last DATA frame, no empty DATA frame after it', async () => {
    // Node's compatibility response waits for trailers that never come and then ends the stream with an
    // empty DATA frame a loop turn later: one more frame and one more write per response. The edge ends it
    // on the body's last DATA frame; a response with trailers still ends on its trailers.
    const frames = async (path: string): Promise<string[]> => {
      const { stdout } = await run('nghttp', ['-v', `http://127.0.0.1:${port}/session/web${path}`]);
      return stdout
        .split('\n')
        .filter((line) => /recv (DATA|HEADERS) frame/.test(line))
        .map((line) => /recv (\w+) frame <length=(\d+), flags=(0x[0-9a-f]+)/.exec(line)!.slice(1).join(' '));
    };
    const plain = await frames('/head');
    expect(plain.length).toBe(2);
    expect(plain[0]).toMatch(/^HEADERS \d+ 0x04$/);
    expect(plain[1]).toMatch(/^DATA [1-9]\d* 0x01$/);
    const withTrailers = await frames('/trailers');
    expect(withTrailers.at(-1)).toMatch(/^HEADERS \d+ 0x05$/);
  });

  it('curl --http2-prior-knowledge: GET and a POST', async () => {
    const get = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-w',
      '\n%{http_version} %{http_code}',
      `http://127.0.0.1:${port}/session/web/head`,
    ]);
    expect(get.stdout).toMatch(/\n2 200$/);
    const post = await run('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '--data-binary',
      'posted by curl',
      '-H',
      'content-type: text/plain',
      `http://127.0.0.1:${port}/session/web/echo`,
    ]);
    expect(post.stdout).toBe('posted by curl');
  });
});
