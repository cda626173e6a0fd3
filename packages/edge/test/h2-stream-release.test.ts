import { once } from 'node:events';
import { connect } from 'node:http2';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { EdgeHttp2Request } from '../src/listeners/http2-messages.js';
import { DEFAULT_HTTP2_LIMITS, PublicHttp2Server } from '../src/listeners/http2-server.js';

// Node keeps a closed Http2Stream reachable until the next full collection: whatever the edge hangs on it
// would be promoted with it (bench/README.md, "Issue #32: unary gRPC CPU per call"). So once a stream has
// closed, it must no longer lead to the request and response built around it.

let listener: Server | undefined;
let h2: PublicHttp2Server | undefined;
afterEach(async () => {
  h2?.destroy();
  if (listener !== undefined) {
    const closed = once(listener, 'close');
    listener.close();
    await closed;
  }
  listener = undefined;
  h2 = undefined;
});

/** The values the stream holds under the edge's own symbols (`tunnel2.request`, `tunnel2.response`). */
function edgeSlots(stream: object): unknown[] {
  return Object.getOwnPropertySymbols(stream)
    .filter((symbol) => symbol.description?.startsWith('tunnel2.'))
    .map((symbol) => (stream as Record<symbol, unknown>)[symbol]);
}

describe('the public HTTP/2 side lets go of a closed stream', () => {
  it('a request and its response are no longer reachable from their stream once it closed', async () => {
    const requests: EdgeHttp2Request[] = [];
    const answered = new Promise<void>((resolve) => {
      h2 = new PublicHttp2Server({
        limits: { ...DEFAULT_HTTP2_LIMITS, maxHeaderListSize: 64 * 1024 },
        idleTimeoutMs: 0,
        logger: pino({ level: 'silent' }),
        onRequest: (req, res) => {
          requests.push(req);
          // While the exchange runs, the stream carries both (its events reach them through it).
          expect(edgeSlots(req.stream).filter((value) => value !== undefined)).toHaveLength(2);
          req.resume();
          req.on('end', () => {
            res.writeHead(200, { 'content-type': 'application/grpc' });
            res.addTrailers({ 'grpc-status': '0' });
            res.end(Buffer.from('answer'));
            resolve();
          });
        },
      });
    });
    listener = createServer((socket) => h2?.handle(socket));
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    const session = connect(`http://127.0.0.1:${(listener.address() as AddressInfo).port}`);
    try {
      const call = session.request({
        ':method': 'POST',
        ':path': '/svc/Echo',
        'content-type': 'application/grpc',
      });
      call.end(Buffer.from('question'));
      const trailers = once(call, 'trailers');
      call.resume();
      await answered;
      expect((await trailers)[0]['grpc-status']).toBe('0');
      const stream = requests[0]!.stream;
      if (!stream.closed) await once(stream, 'close');
      expect(edgeSlots(stream)).toHaveLength(2);
      expect(edgeSlots(stream).every((value) => value === undefined)).toBe(true);
    } finally {
      session.close();
    }
  });
});
