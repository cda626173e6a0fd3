import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Route } from './router.js';
import { parseCount, sendBadRequest, sendBuffer, sendJson } from './send-response.js';
import { writeDeterministicBytes } from './write-deterministic-bytes.js';

/** Largest /bytes and /abort-after size: far beyond 2^31, still exact as a double. */
export const MAX_BYTES = 2 ** 40;
export const MAX_STREAM_CHUNKS = 100_000;
export const MAX_STREAM_INTERVAL_MS = 60_000;

const MULTI_BODY = Buffer.from('multi');

/** Hashes a request body as it arrives (the async iterator reads only as fast as we consume). */
async function digestBody(req: IncomingMessage): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    hash.update(buffer);
    bytes += buffer.length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Endpoints the tunnel's own tests use to check bodies, streaming, headers, statuses and failures. */
export const fixtureRoutes: readonly Route[] = [
  {
    methods: ['GET'],
    path: '/bytes/:n',
    description:
      'n deterministic pseudo-random bytes, streamed in 64 KiB chunks (?chunked=1 omits Content-Length)',
    handle: ({ req, res, params, query }) => {
      const n = parseCount(params[0], MAX_BYTES);
      if (n === undefined) {
        sendBadRequest(res, `n must be an integer number of bytes in [0, ${MAX_BYTES}]`);
        return;
      }
      const chunked = new URLSearchParams(query).get('chunked') === '1';
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        ...(chunked ? {} : { 'content-length': n }),
      });
      if (req.method === 'HEAD') res.end();
      else writeDeterministicBytes(res, n, { end: true });
    },
  },
  {
    methods: ['GET'],
    path: '/abort-after/:n',
    description: 'declares 2n+1 bytes, sends the first n of /bytes, then drops the connection',
    handle: ({ res, params, dropConnection }) => {
      const n = parseCount(params[0], MAX_BYTES);
      if (n === undefined) {
        sendBadRequest(res, `n must be an integer number of bytes in [0, ${MAX_BYTES}]`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 2 * n + 1 });
      writeDeterministicBytes(res, n, { drop: dropConnection });
    },
  },
  {
    methods: ['GET'],
    path: '/stream/:chunks',
    description: `chunks lines "chunk <i>\\n", chunked, ?interval=<ms> apart (0..${MAX_STREAM_INTERVAL_MS})`,
    handle: ({ res, params, query }) => {
      const count = parseCount(params[0], MAX_STREAM_CHUNKS);
      const interval = parseCount(new URLSearchParams(query).get('interval') ?? '0', MAX_STREAM_INTERVAL_MS);
      if (count === undefined || interval === undefined) {
        sendBadRequest(
          res,
          `chunks must be in [0, ${MAX_STREAM_CHUNKS}] and interval in [0, ${MAX_STREAM_INTERVAL_MS}] ms`,
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      let sent = 0;
      let timer: NodeJS.Timeout | undefined;
      let immediate: NodeJS.Immediate | undefined;
      const schedule = (): void => {
        if (interval > 0) timer = setTimeout(tick, interval);
        else immediate = setImmediate(tick);
      };
      function tick(): void {
        if (res.destroyed) return;
        if (sent === count) {
          res.end();
          return;
        }
        if (res.write(`chunk ${sent++}\n`)) schedule();
        else res.once('drain', schedule);
      }
      res.once('close', () => {
        clearTimeout(timer);
        clearImmediate(immediate);
      });
      tick();
    },
  },
  {
    methods: 'ANY',
    path: '/echo/request/*',
    description:
      'JSON of the request as seen (any sub-path): method, url, httpVersion, rawHeaders, rawTrailers, ' +
      'bodyLength, bodySha256',
    handle: async ({ req, res }) => {
      const body = await digestBody(req);
      sendJson(res, 200, {
        method: req.method,
        url: req.url,
        httpVersion: req.httpVersion,
        rawHeaders: req.rawHeaders,
        rawTrailers: req.rawTrailers,
        bodyLength: body.bytes,
        bodySha256: body.sha256,
      });
    },
  },
  {
    methods: ['POST', 'PUT'],
    path: '/upload',
    description: 'consumes the body as it arrives, answers { bytes, sha256 }',
    handle: async ({ req, res }) => {
      sendJson(res, 200, await digestBody(req));
    },
  },
  {
    methods: ['POST', 'PUT'],
    path: '/discard',
    description: 'consumes the body as it arrives without looking at it, answers { bytes } (bulk uploads)',
    handle: ({ req, res }) => {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
      });
      req.on('end', () => sendJson(res, 200, { bytes }));
    },
  },
  {
    methods: ['GET'],
    path: '/headers/multi',
    description: 'two separate Set-Cookie headers and X-Multi: a, X-Multi: b as repeated lines',
    handle: ({ res }) => {
      res.setHeader('Set-Cookie', ['a=1; Path=/', 'b=2; Path=/; HttpOnly']);
      res.appendHeader('X-Multi', 'a');
      res.appendHeader('X-Multi', 'b');
      sendBuffer(res, 200, 'text/plain', MULTI_BODY);
    },
  },
  {
    methods: ['GET'],
    path: '/status/:code',
    description: 'answers that status (200..599), with a small JSON body except for 204, 205 and 304',
    handle: ({ res, params }) => {
      const status = parseCount(params[0], 599);
      // 1xx cannot be a final status in node:http (and would not end the exchange).
      if (status === undefined || status < 200) {
        sendBadRequest(res, 'status must be an integer in [200, 599]');
        return;
      }
      if (status === 204 || status === 304) {
        res.writeHead(status);
        res.end();
      } else if (status === 205) {
        // 205 forbids content; an explicit zero length keeps the connection reusable.
        res.writeHead(status, { 'content-length': 0 });
        res.end();
      } else {
        sendJson(res, status, { status });
      }
    },
  },
];
