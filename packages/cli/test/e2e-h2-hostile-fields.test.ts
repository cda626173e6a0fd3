import {
  decodeResponseHead,
  ErrorCode,
  encodeRequestHead,
  MIN_FRAME_SIZE,
  type MuxSession,
  type MuxStream,
  StreamResetError,
} from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { startPlayedEdge } from './support/played-edge.js';

// Fields node:http2 lets through on one side but the other side refuses: a hostile or careless backend (a
// head the tunnel's frame cannot carry) or client (request trailers node:http2 will not send) must cost
// that one exchange, never the agent. The played edge takes frames of the smallest size the protocol
// allows, so a head of 20 KB is one node:http2 accepts from the backend but no tunnel frame carries.

let backend: H2TestBackend;
let session: MuxSession;
let tunnel: Tunnel;
let closePlayed: () => Promise<void>;
const crashes: Error[] = [];
const onUncaught = (err: Error): void => {
  crashes.push(err);
};

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  backend = await startH2Backend();
  let gotSession: (s: MuxSession) => void = () => {};
  const ready = new Promise<MuxSession>((resolve) => {
    gotSession = resolve;
  });
  const played = await startPlayedEdge(
    (_hello, s) => {
      s.sendHello({ name: 'hostile', url: 'http://hostile.played/', urls: [], http2: true }, true);
      gotSession(s);
    },
    { maxFrameSize: MIN_FRAME_SIZE },
  );
  closePlayed = played.close;
  tunnel = await connect({ target: backend.port, server: played.url, h2c: true });
  session = await ready;
});
afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  await tunnel.close(0);
  await closePlayed();
  await backend.close();
});

interface Seen {
  heads: { status: number; end: boolean }[];
  body: string;
  reset?: number;
}

function exchange(send: (stream: MuxStream) => void): Promise<Seen> {
  return new Promise((resolve) => {
    const seen: Seen = { heads: [], body: '' };
    const stream = session.openStream();
    stream.handler = {
      onHeaders: (payload, end) => {
        const head = decodeResponseHead(payload);
        seen.heads.push({ status: head.status, end });
      },
      onData: (chunk) => {
        seen.body += chunk.toString();
        stream.consume(chunk.length);
      },
      onEnd: () => resolve(seen),
      onReset: (err) => resolve({ ...seen, reset: err instanceof StreamResetError ? err.protocolCode : -1 }),
      onDrain: () => {},
    };
    send(stream);
  });
}

const get = (path: string): Buffer =>
  encodeRequestHead({ method: 'GET', target: path, headers: ['host', 'hostile.played'] }, MIN_FRAME_SIZE);

/** The agent still forwards: a plain request after the hostile one is answered. */
async function stillForwards(): Promise<void> {
  backend.routes.set('/ok', (stream) => {
    stream.respond({ ':status': 200 });
    stream.end('still here');
  });
  const seen = await exchange((stream) => stream.sendHeaders(get('/ok'), true));
  expect(seen.body).toBe('still here');
  expect(crashes).toEqual([]);
}

describe('a backend head the tunnel cannot carry', () => {
  it('a 103 larger than a tunnel frame is dropped; the final answer still comes', async () => {
    backend.routes.set('/big-103', (stream) => {
      stream.additionalHeaders({ ':status': 103, link: `</${'a'.repeat(20_000)}>; rel=preload` });
      stream.respond({ ':status': 200 });
      stream.end('after the hint');
    });
    const seen = await exchange((stream) => stream.sendHeaders(get('/big-103'), true));
    expect(crashes).toEqual([]);
    expect(seen.heads.map((h) => h.status)).toEqual([200]);
    expect(seen.body).toBe('after the hint');
    await stillForwards();
  });

  it('trailers larger than a tunnel frame: the response is aborted (BACKEND_ERROR), the agent lives', async () => {
    backend.routes.set('/big-trailers', (stream) => {
      stream.respond({ ':status': 200 }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'x-big': 'b'.repeat(20_000) }));
      stream.end('body');
    });
    const seen = await exchange((stream) => stream.sendHeaders(get('/big-trailers'), true));
    expect(crashes).toEqual([]);
    expect(seen.heads.map((h) => h.status)).toEqual([200]);
    expect(seen.reset).toBe(ErrorCode.BACKEND_ERROR);
    await stillForwards();
  });
});

describe('request trailers node:http2 refuses to send', () => {
  for (const [label, fields] of [['a name that is no token', ['x bad', '1']]] as const) {
    it(`${label}: the stream is reset, the backend sees CANCEL, the agent lives`, {
      timeout: 15_000,
    }, async () => {
      const backendSaw = new Promise<number>((resolve) => {
        backend.routes.set('/upload', (stream) => {
          stream.on('data', () => {});
          stream.on('close', () => resolve(stream.rstCode ?? -1));
        });
      });
      const seen = await exchange((stream) => {
        stream.sendHeaders(
          encodeRequestHead(
            { method: 'POST', target: '/upload', headers: ['host', 'hostile.played'] },
            MIN_FRAME_SIZE,
          ),
          false,
        );
        stream.write(Buffer.from('body'));
        stream.sendHeaders(
          encodeRequestHead({ method: 'POST', target: '/upload', headers: [...fields] }, MIN_FRAME_SIZE),
          true,
        );
      });
      expect(crashes).toEqual([]);
      expect(seen.reset).toBe(ErrorCode.PROTOCOL_ERROR);
      expect(await backendSaw).toBe(0x8);
      await stillForwards();
    });
  }
});

describe('trailers that come while the client reads slowly', () => {
  // node:http2 emits 'end' on a paused stream once its buffer is empty: the trailers can come while the
  // body's last bytes still wait for the client's credit. They must follow those bytes, not throw.
  for (const extra of [1, 100, 16 * 1024 + 1]) {
    it(`a body of the stream window + ${extra} bytes, then trailers: all of it arrives, in order`, async () => {
      const size = 256 * 1024 + extra;
      backend.routes.set('/slow-trailers', (stream) => {
        stream.respond({ ':status': 200 }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(Buffer.alloc(size, 7));
      });
      const seen = await new Promise<{ body: number; heads: boolean[]; reset?: number }>((resolve) => {
        const out = { body: 0, heads: [] as boolean[] };
        const stream = session.openStream();
        const held: Buffer[] = [];
        stream.handler = {
          onHeaders: (_payload, end) => {
            out.heads.push(end);
          },
          onData: (chunk) => {
            out.body += chunk.length;
            held.push(chunk);
          },
          onEnd: () => resolve(out),
          onReset: (err) =>
            resolve({ ...out, reset: err instanceof StreamResetError ? err.protocolCode : -1 }),
          onDrain: () => {},
        };
        stream.sendHeaders(get('/slow-trailers'), true);
        // The client takes nothing for a while (the trailers arrive at the agent meanwhile), then everything.
        const pay = (): void => {
          for (const chunk of held.splice(0)) stream.consume(chunk.length);
          if (!stream.closed) setTimeout(pay, 20);
        };
        setTimeout(pay, 300);
      });
      expect(crashes).toEqual([]);
      expect(seen.reset).toBeUndefined();
      expect(seen.body).toBe(size);
      expect(seen.heads).toEqual([false, true]);
      await stillForwards();
    });
  }
});
