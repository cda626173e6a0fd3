import { once } from 'node:events';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { ErrorCode, type RequestHead } from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { h2c, h2Request } from './support/h2-client.js';
import { hostileAgent, responseHead } from './support/hostile-agent.js';
import { silent, until } from './support/stack.js';

// The edge's half of gRPC (PROTOCOL.md, HTTP/2 and gRPC): its own errors in the gRPC form, grpc-timeout,
// the agent's `http2` capability, request trailers carried as a second head, and tunnel resets mapped to
// RST_STREAM codes. The agent is one written in the test (it says `http2` and answers as each test asks),
// or one that says nothing of `http2` where an agent from before HTTP/2 is the point.

let edge: Edge;
let port: number;
const closers: (() => void)[] = [];
/** Heads (request and trailers) the test agent received, by target. */
const heads = new Map<string, { head: RequestHead; at: number }[]>();
const resets: string[] = [];
/** Heads received per agent stream: the second is the request's trailers. */
const headsOn = new WeakMap<object, number>();

const grpcHeaders = (name: string, path: string, extra: Record<string, string> = {}) => ({
  ':method': 'POST',
  ':path': path,
  ':authority': `${name}.localhost:${port}`,
  'content-type': 'application/grpc',
  te: 'trailers',
  ...extra,
});

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent, reconnectWaitMs: 0 });
  ({ port } = await edge.listen());
  closers.push(
    await hostileAgent(
      edge.url,
      'grpc',
      (stream, request) => {
        const seen = heads.get(request.target) ?? [];
        seen.push({ head: request, at: seen.length });
        heads.set(request.target, seen);
        const onStream = (headsOn.get(stream) ?? 0) + 1;
        headsOn.set(stream, onStream);
        const prior = stream.handler;
        if (prior !== undefined && onStream === 1) {
          stream.handler = {
            ...prior,
            onReset: () => resets.push(request.target),
          };
        }
        if (onStream > 1) {
          // The request's trailer head: answered now, a normal gRPC answer (head, DATA, trailers).
          stream.sendHeaders(responseHead(200, ['content-type', 'application/grpc']), false);
          stream.write(Buffer.from([0, 0, 0, 0, 0]));
          stream.sendHeaders(responseHead(200, ['grpc-status', '0']), true);
          return;
        }
        switch (request.target) {
          case '/svc/TrailersOnly':
            stream.sendHeaders(
              responseHead(200, [
                'content-type',
                'application/grpc',
                'grpc-status',
                '5',
                'grpc-message',
                'nope',
              ]),
              true,
            );
            return;
          case '/svc/Hang':
          case '/svc/WithTrailers':
            return;
          case '/svc/HeadThenHang':
            stream.sendHeaders(responseHead(200, ['content-type', 'application/grpc']), false);
            return;
          case '/connection-fields':
            // Fields HTTP/2 forbids (RFC 9113 §8.2.2), in the head and the trailers: dropped, never a crash.
            stream.sendHeaders(
              responseHead(200, [
                'Connection',
                'x-hop',
                'X-Hop',
                'gone',
                'Keep-Alive',
                'timeout=5',
                'Proxy-Connection',
                'keep-alive',
                'Upgrade',
                'h2c',
                'HTTP2-Settings',
                'AAMAAABkAAQAAP__',
                'Transfer-Encoding',
                'chunked',
                'X-Kept',
                'yes',
              ]),
              false,
            );
            stream.write(Buffer.from('body'));
            stream.sendHeaders(responseHead(200, ['Connection', 'close', 'x-trailer', 'kept']), true);
            return;
          case '/svc/ResetBefore':
            stream.reset(ErrorCode.BACKEND_UNREACHABLE);
            return;
          default: {
            // /svc/ResetAfter/<code>: a head, a message, then a reset with that tunnel code.
            const code = Number(request.target.split('/')[3]);
            stream.sendHeaders(responseHead(200, ['content-type', 'application/grpc']), false);
            stream.write(Buffer.from([0, 0, 0, 0, 0]));
            setImmediate(() => stream.reset(code));
          }
        }
      },
      { http2: true },
    ),
  );
  // An agent from before HTTP/2: its HELLO says nothing of `http2`.
  closers.push(
    await hostileAgent(edge.url, 'legacy', (stream) => {
      stream.sendHeaders(responseHead(200, ['content-length', '2']), false);
      stream.write(Buffer.from('ok'));
      stream.end();
    }),
  );
});

afterAll(async () => {
  for (const close of closers) close();
  await edge.close(0);
});

describe('gRPC errors answered by the edge', () => {
  it('an unknown tunnel: trailers-only, grpc-status 12 with a message and the stable code', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, grpcHeaders('nobody', '/svc/Method'), {
      body: [Buffer.alloc(5)],
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('application/grpc');
    expect(answer.headers['grpc-status']).toBe('12');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(/nobody/);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(answer.body.length).toBe(0);
    expect(answer.trailers).toBeUndefined();
  });

  it('an offline tunnel (its agent gone, name held): grpc-status 14 UNAVAILABLE', async () => {
    const close = await hostileAgent(edge.url, 'gone', () => {}, { http2: true });
    close();
    const session = h2c(port);
    let answer = await h2Request(session, grpcHeaders('gone', '/svc/Method'), { body: [Buffer.alloc(5)] });
    // The edge may not have seen the socket close yet: then the call reached a dying session.
    for (let i = 0; i < 50 && answer.headers['x-tunnel2-error'] !== 'TUNNEL2_ERR_TUNNEL_OFFLINE'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      answer = await h2Request(session, grpcHeaders('gone', '/svc/Method'), { body: [Buffer.alloc(5)] });
    }
    session.close();
    expect(answer.headers['grpc-status']).toBe('14');
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(/gone.*offline/);
  });

  it('an agent that did not say http2: 12 UNIMPLEMENTED, TUNNEL2_ERR_AGENT_TOO_OLD, naming the upgrade', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, grpcHeaders('legacy', '/svc/Method'), {
      body: [Buffer.alloc(5)],
    });
    // A request that is not gRPC still reaches that agent.
    const plain = await h2Request(session, { ':path': '/', ':authority': `legacy.localhost:${port}` });
    session.close();
    expect(answer.headers['grpc-status']).toBe('12');
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_AGENT_TOO_OLD');
    const message = decodeURIComponent(String(answer.headers['grpc-message']));
    expect(message).toMatch(/its agent \(hostile\)/);
    expect(message).toMatch(/upgrade @tunnel2\/cli/);
    expect(plain.status).toBe(200);
    expect(plain.body.toString()).toBe('ok');
  });

  it('over HTTP/1.1 too: a gRPC request for an unknown tunnel gets the gRPC form', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/svc/Method`, {
      method: 'POST',
      headers: { host: `nobody.localhost:${port}`, 'content-type': 'application/grpc+proto' },
      body: Buffer.alloc(5),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('grpc-status')).toBe('12');
    expect(await res.text()).toBe('');
  });

  it('a reset before the head: the gRPC form (14), never a 502 page', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, grpcHeaders('grpc', '/svc/ResetBefore'), {
      body: [Buffer.alloc(5)],
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.headers['grpc-status']).toBe('14');
    expect(answer.body.length).toBe(0);
  });
});

describe('grpc-timeout', () => {
  it('expiring before the head: grpc-status 4 DEADLINE_EXCEEDED, the agent stream cancelled', async () => {
    const session = h2c(port);
    const sent = performance.now();
    const answer = await h2Request(session, grpcHeaders('grpc', '/svc/Hang', { 'grpc-timeout': '200m' }), {
      body: [Buffer.alloc(5)],
    });
    // Never before the deadline (the edge's shared sweep may be late by a tenth of it, never early).
    expect(performance.now() - sent).toBeGreaterThanOrEqual(200);
    session.close();
    expect(answer.headers['grpc-status']).toBe('4');
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_RESPONSE_TIMEOUT');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(/grpc-timeout, 200 ms/);
    await until(() => resets.includes('/svc/Hang'));
    expect(heads.get('/svc/Hang')?.[0]?.head.headers).toContain('grpc-timeout');
  });

  it('expiring after the head: RST_STREAM CANCEL to the client', async () => {
    const session = h2c(port);
    const sent = performance.now();
    const answer = await h2Request(
      session,
      grpcHeaders('grpc', '/svc/HeadThenHang', { 'grpc-timeout': '1S' }),
      { body: [Buffer.alloc(5)] },
    );
    // The call's deadline still armed past the head, and not fired before it.
    expect(performance.now() - sent).toBeGreaterThanOrEqual(1_000);
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.rstCode).toBe(0x8);
    await until(() => resets.includes('/svc/HeadThenHang'));
  });

  it('a malformed value is ignored', async () => {
    const session = h2c(port);
    const answer = await h2Request(
      session,
      grpcHeaders('grpc', '/svc/TrailersOnly', { 'grpc-timeout': '1x' }),
      {
        body: [Buffer.alloc(5)],
      },
    );
    session.close();
    expect(answer.headers['grpc-status']).toBe('5');
  });
});

describe('the mapping onto tunnel frames', () => {
  it("the agent's final head with END_STREAM is one HEADERS frame ending the stream (trailers-only)", async () => {
    const session = h2c(port);
    const stream = session.request(grpcHeaders('grpc', '/svc/TrailersOnly'));
    stream.end(Buffer.alloc(5));
    const [headers, flags] = (await once(stream, 'response')) as [Record<string, string>, number];
    stream.resume();
    await once(stream, 'close');
    session.close();
    expect(flags & 0x1).toBe(0x1);
    expect(headers['grpc-status']).toBe('5');
    expect(headers['grpc-message']).toBe('nope');
  });

  it("the client's request trailers reach the agent as a second head after the body", async () => {
    const session = h2c(port);
    const answer = await h2Request(session, grpcHeaders('grpc', '/svc/WithTrailers'), {
      body: [Buffer.alloc(5)],
      trailers: { 'x-checksum': 'abc', 'trace-bin': 'AAEC' },
    });
    session.close();
    const seen = heads.get('/svc/WithTrailers') ?? [];
    expect(seen).toHaveLength(2);
    expect(seen[1]?.head.headers).toEqual(['x-checksum', 'abc', 'trace-bin', 'AAEC']);
    expect(answer.trailers?.['grpc-status']).toBe('0');
  });

  it("fields HTTP/2 forbids in the agent's head and trailers are dropped; the rest arrives", async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/connection-fields',
      ':authority': `grpc.localhost:${port}`,
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe('body');
    expect(answer.headers['x-kept']).toBe('yes');
    for (const name of [
      'connection',
      'x-hop',
      'keep-alive',
      'proxy-connection',
      'upgrade',
      'http2-settings',
      'transfer-encoding',
    ])
      expect(answer.headers[name]).toBeUndefined();
    expect(answer.trailers?.['x-trailer']).toBe('kept');
    expect(answer.trailers?.connection).toBeUndefined();
  });

  for (const [tunnel, h2, name] of [
    [ErrorCode.CANCEL, 0x8, 'CANCEL'],
    [ErrorCode.REFUSED_STREAM, 0x7, 'REFUSED_STREAM'],
    [ErrorCode.BACKEND_ERROR, 0x2, 'INTERNAL_ERROR'],
  ] as const) {
    it(`a tunnel RESET after the head becomes RST_STREAM ${name}`, async () => {
      const session = h2c(port);
      const answer = await h2Request(session, grpcHeaders('grpc', `/svc/ResetAfter/${tunnel}`), {
        body: [Buffer.alloc(5)],
      });
      session.close();
      expect(answer.status).toBe(200);
      expect(answer.rstCode).toBe(h2);
    });
  }
});
