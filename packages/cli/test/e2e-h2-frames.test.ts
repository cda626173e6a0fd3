import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { constants as h2 } from 'node:http2';
import { type AddressInfo, createServer } from 'node:net';
import {
  decodeResponseHead,
  ErrorCode,
  encodeRequestHead,
  type MuxSession,
  type MuxStream,
  StreamResetError,
} from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { startPlayedEdge } from './support/played-edge.js';
import { until } from './support/stack.js';

// The agent's half of PROTOCOL.md §13 seen frame by frame: an edge played from the protocol package opens
// streams as an HTTP/2-serving edge would (request trailers as a second HEADERS), and reads back what the
// agent sends (trailers-only answers, trailer heads, RESET codes for the backend's RST_STREAM).

const LIMIT = 64 * 1024;

let backend: H2TestBackend;
let session: MuxSession;
let tunnel: Tunnel;
let closePlayed: () => Promise<void>;

beforeAll(async () => {
  backend = await startH2Backend();
  let gotSession: (s: MuxSession) => void = () => {};
  const ready = new Promise<MuxSession>((resolve) => {
    gotSession = resolve;
  });
  const played = await startPlayedEdge((_hello, s) => {
    s.sendHello({ name: 'frames', url: 'http://frames.played/', urls: [], http2: true }, true);
    gotSession(s);
  });
  closePlayed = played.close;
  tunnel = await connect({ target: backend.port, server: played.url, h2c: true });
  session = await ready;
});
afterAll(async () => {
  await tunnel.close(0);
  await closePlayed();
  await backend.close();
});

/** What came back on one stream: the heads in order (with END_STREAM), the body, or the reset code. */
interface Seen {
  heads: { status: number; headers: string[]; end: boolean }[];
  body: Buffer;
  reset?: number;
}

/** Opens a stream, lets `send` write the request frames, and resolves when the stream ends or is reset. */
function exchange(
  on: MuxSession,
  send: (stream: MuxStream) => void,
  onFirstHead?: (stream: MuxStream) => void,
): Promise<Seen> {
  return new Promise((resolve) => {
    const seen: Seen = { heads: [], body: Buffer.alloc(0) };
    const stream = on.openStream();
    stream.handler = {
      onHeaders: (payload, end) => {
        const head = decodeResponseHead(payload);
        seen.heads.push({ status: head.status, headers: head.headers, end });
        if (seen.heads.length === 1) onFirstHead?.(stream);
      },
      onData: (chunk) => {
        seen.body = Buffer.concat([seen.body, chunk]);
        stream.consume(chunk.length);
      },
      onEnd: () => resolve(seen),
      onReset: (err) => resolve({ ...seen, reset: err instanceof StreamResetError ? err.protocolCode : -1 }),
      onDrain: () => {},
    };
    send(stream);
  });
}

const grpcHead = (path: string): Buffer =>
  encodeRequestHead(
    {
      method: 'POST',
      target: path,
      headers: ['host', 'frames.played', 'content-type', 'application/grpc'],
    },
    LIMIT,
  );

describe('request trailers', () => {
  it('reach an HTTP/2 backend as its request trailers, after the whole body', async () => {
    const got = new Promise<{ body: string; trailers: Record<string, unknown> }>((resolve) => {
      backend.routes.set('/pkg.Svc/Upload', (stream) => {
        let body = '';
        let trailers: Record<string, unknown> = {};
        stream.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        stream.on('trailers', (t) => {
          trailers = t;
        });
        stream.on('end', () => {
          stream.respond(
            { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' },
            {
              endStream: true,
            },
          );
          resolve({ body, trailers });
        });
      });
    });
    const seen = await exchange(session, (stream) => {
      stream.sendHeaders(grpcHead('/pkg.Svc/Upload'), false);
      stream.write(Buffer.from('part one, '));
      stream.write(Buffer.from('part two'));
      stream.sendHeaders(
        encodeRequestHead(
          {
            method: 'POST',
            target: '/pkg.Svc/Upload',
            headers: ['x-checksum', '7f3a', 'x-meta-bin', 'AAE='],
          },
          LIMIT,
        ),
        true,
      );
    });
    const { body, trailers } = await got;
    expect(body).toBe('part one, part two');
    expect(trailers).toMatchObject({ 'x-checksum': '7f3a', 'x-meta-bin': 'AAE=' });
    // The backend's trailers-only answer: one final head carrying END_STREAM, nothing after it.
    expect(seen.heads).toEqual([
      expect.objectContaining({
        status: 200,
        end: true,
        headers: expect.arrayContaining(['grpc-status', '0']),
      }),
    ]);
    expect(seen.body.length).toBe(0);
  });

  it('are dropped, with no error, towards an HTTP/1.1 backend', async () => {
    const server = createHttpServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      req.on('end', () => res.end(`h1 got ${body}`));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    let gotSession: (s: MuxSession) => void = () => {};
    const ready = new Promise<MuxSession>((resolve) => {
      gotSession = resolve;
    });
    const played = await startPlayedEdge((_hello, s) => {
      s.sendHello({ name: 'h1', url: 'http://h1.played/', urls: [] }, true);
      gotSession(s);
    });
    const h1 = await connect({ target: (server.address() as AddressInfo).port, server: played.url });
    try {
      const seen = await exchange(await ready, (stream) => {
        stream.sendHeaders(
          encodeRequestHead({ method: 'POST', target: '/up', headers: ['host', 'h1.played'] }, LIMIT),
          false,
        );
        stream.write(Buffer.from('body'));
        stream.sendHeaders(
          encodeRequestHead({ method: 'POST', target: '/up', headers: ['x-checksum', '7f3a'] }, LIMIT),
          true,
        );
      });
      expect(seen.heads[0]?.status).toBe(200);
      expect(seen.body.toString()).toBe('h1 got body');
      expect(seen.reset).toBeUndefined();
    } finally {
      await h1.close(0);
      await played.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('responses', () => {
  it('a normal gRPC answer comes as head, DATA, then a trailer head with END_STREAM', async () => {
    backend.routes.set('/pkg.Svc/Unary', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' }));
      stream.end(Buffer.from([0, 0, 0, 0, 1, 42]));
    });
    const seen = await exchange(session, (stream) => {
      stream.sendHeaders(grpcHead('/pkg.Svc/Unary'), false);
      stream.end();
    });
    expect(seen.heads.map((h) => [h.status, h.end])).toEqual([
      [200, false],
      [200, true],
    ]);
    expect(seen.heads[1]?.headers).toEqual(['grpc-status', '0', 'grpc-message', '']);
    expect(seen.body).toEqual(Buffer.from([0, 0, 0, 0, 1, 42]));
  });
});

describe("the agent's own gRPC-form answers", () => {
  /** A played edge with an agent forwarding to `target` (h2c or not), for one exchange. */
  async function agentFor(
    target: number,
    h2cBackend: boolean,
  ): Promise<{ on: MuxSession; close(): Promise<void> }> {
    let gotSession: (s: MuxSession) => void = () => {};
    const ready = new Promise<MuxSession>((resolve) => {
      gotSession = resolve;
    });
    const played = await startPlayedEdge((_hello, s) => {
      s.sendHello({ name: 'form', url: 'http://form.played/', urls: [], http2: true }, true);
      gotSession(s);
    });
    const agent = await connect({ target, server: played.url, h2c: h2cBackend });
    return {
      on: await ready,
      close: async () => {
        await agent.close(0);
        await played.close();
      },
    };
  }

  const fields = (headers: string[]): Record<string, string> =>
    Object.fromEntries(
      Array.from({ length: headers.length / 2 }, (_, i) => [headers[2 * i], headers[2 * i + 1]]),
    );

  it('a backend that is down: one head with END_STREAM, 200, grpc-status 14, the message percent-encoded', async () => {
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const free = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const { on, close } = await agentFor(free, true);
    try {
      const seen = await exchange(on, (stream) => {
        stream.sendHeaders(grpcHead('/pkg.Svc/Unary'), false);
        stream.end();
      });
      expect(seen.heads).toHaveLength(1);
      expect(seen.heads[0]).toMatchObject({ status: 200, end: true });
      expect(fields(seen.heads[0]!.headers)).toEqual({
        'content-type': 'application/grpc',
        'grpc-status': '14',
        'grpc-message': `tunnel2: backend refused connection on localhost:${free}`,
        'x-tunnel2-error': 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
      });
      expect(seen.body.length).toBe(0);
    } finally {
      await close();
    }
  });

  it('an HTTP/1.1 backend: one head with END_STREAM, grpc-status 12, TUNNEL2_ERR_BACKEND_NOT_HTTP2', async () => {
    const server = createHttpServer((_req, res) => res.end('h1'));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { on, close } = await agentFor((server.address() as AddressInfo).port, false);
    try {
      const seen = await exchange(on, (stream) => {
        stream.sendHeaders(grpcHead('/pkg.Svc/Unary'), false);
        stream.end();
      });
      expect(seen.heads).toHaveLength(1);
      expect(seen.heads[0]).toMatchObject({ status: 200, end: true });
      const head = fields(seen.heads[0]!.headers);
      expect(head['grpc-status']).toBe('12');
      expect(head['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_NOT_HTTP2');
      // Percent-encoded as gRPC says: the backquotes are printable, kept as they are.
      expect(head['grpc-message']).toContain(`run \`tunnel2 http localhost:`);
      expect(head['grpc-message']).toContain('--h2c`');
    } finally {
      await close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('resets', () => {
  for (const [rst, code] of [
    [h2.NGHTTP2_CANCEL, ErrorCode.CANCEL],
    [h2.NGHTTP2_REFUSED_STREAM, ErrorCode.REFUSED_STREAM],
    [h2.NGHTTP2_INTERNAL_ERROR, ErrorCode.BACKEND_ERROR],
    [h2.NGHTTP2_ENHANCE_YOUR_CALM, ErrorCode.BACKEND_ERROR],
  ] as const) {
    it(`the backend's RST_STREAM ${rst} becomes the tunnel RESET ${code}`, async () => {
      backend.routes.set(`/rst-${rst}`, (stream) => {
        // With waitForTrailers the body's end is not END_STREAM, so close(code) resets rather than ending the
        // response cleanly first.
        stream.respond({ ':status': 200 }, { waitForTrailers: true });
        stream.write('x', () => stream.close(rst));
      });
      const seen = await exchange(session, (stream) => {
        stream.sendHeaders(
          encodeRequestHead(
            { method: 'GET', target: `/rst-${rst}`, headers: ['host', 'frames.played'] },
            LIMIT,
          ),
          true,
        );
      });
      expect(seen.reset).toBe(code);
    });
  }

  it('a tunnel RESET of any code reaches the backend as RST_STREAM CANCEL', async () => {
    const closed = new Promise<number>((resolve) => {
      backend.routes.set('/long', (stream) => {
        stream.respond({ ':status': 200 });
        stream.write('first');
        stream.on('close', () => resolve(stream.rstCode ?? -1));
      });
    });
    void exchange(
      session,
      (stream) => {
        stream.sendHeaders(grpcHead('/long'), false);
      },
      (stream) => stream.reset(ErrorCode.INTERNAL_ERROR),
    );
    expect(await closed).toBe(h2.NGHTTP2_CANCEL);
  });
});

describe('a stream the backend left unprocessed (beyond its GOAWAY last-stream-id)', () => {
  /**
   * '/hold' waits; '/unprocessed' arriving on the same connection makes the backend say GOAWAY naming the
   * held stream as the last it processes, then answer that one: the second was never processed (RFC 9113
   * §8.7). On a connection with nothing held, '/unprocessed' is answered.
   */
  function goawayRoutes(): void {
    const held = new Map<unknown, import('node:http2').ServerHttp2Stream>();
    backend.routes.set('/hold', (stream) => {
      held.set(stream.session, stream);
    });
    backend.routes.set('/unprocessed', (stream) => {
      const first = held.get(stream.session);
      if (first === undefined) {
        stream.respond({ ':status': 200 });
        stream.end('answered on a new connection');
        return;
      }
      held.delete(stream.session);
      stream.session?.goaway(h2.NGHTTP2_NO_ERROR, first.id);
      setTimeout(() => first.respond({ ':status': 200 }, { endStream: true }), 50);
    });
  }

  const open = (method: string, path: string, headers: string[], end: boolean) => (stream: MuxStream) => {
    stream.sendHeaders(
      encodeRequestHead({ method, target: path, headers: ['host', 'frames.played', ...headers] }, LIMIT),
      end,
    );
    if (!end) {
      stream.write(Buffer.from([0, 0, 0, 0, 0]));
      stream.end();
    }
  };

  it('a gRPC call: the tunnel RESET is REFUSED_STREAM (the client may retry it), not a failure', async () => {
    goawayRoutes();
    const held = exchange(session, open('GET', '/hold', [], true));
    await until(() => backend.seen.some((h) => h[':path'] === '/hold'), { what: 'held', timeoutMs: 5_000 });
    const seen = await exchange(
      session,
      open('POST', '/unprocessed', ['content-type', 'application/grpc'], false),
    );
    expect(seen.reset).toBe(ErrorCode.REFUSED_STREAM);
    expect((await held).heads[0]?.status).toBe(200);
  });

  it('a bodiless request, even a POST, is sent again on a new connection', async () => {
    goawayRoutes();
    const held = exchange(session, open('GET', '/hold', [], true));
    await until(() => backend.seen.filter((h) => h[':path'] === '/hold').length >= 2, {
      what: 'held',
      timeoutMs: 5_000,
    });
    const seen = await exchange(session, open('POST', '/unprocessed', [], true));
    expect(seen.reset).toBeUndefined();
    expect(seen.body.toString()).toBe('answered on a new connection');
    expect((await held).heads[0]?.status).toBe(200);
  });
});
