import type { OutgoingHttpHeaders } from 'node:http';
import { pipeline } from 'node:stream';
import type { Route } from './router.js';
import { JSON_TYPE, parseCount, sendBadRequest, sendBuffer, sendJson } from './send-response.js';

export const MAX_DELAY_MS = 60_000;

// Pre-serialized once: the hot endpoints do no JSON or string work per request.
const PING_BODY = Buffer.from('pong');
const GET_BODY = Buffer.from(
  JSON.stringify({
    id: 42,
    name: 'tunnel2 load-test item',
    description: 'A small JSON document of about four hundred bytes, the size of a typical API answer.',
    tags: ['load', 'test', 'tunnel', 'http'],
    price: 19.99,
    inStock: true,
    dimensions: { width: 10, height: 20, depth: 5, unit: 'cm' },
    owner: { id: 7, login: 'tunnel2', roles: ['reader', 'writer'] },
    updatedAt: '2026-01-01T00:00:00.000Z',
  }),
);
const FAST_BODY = Buffer.from(JSON.stringify({ ok: true, message: 'fast' }));

/** The endpoints load tests hit: tiny, pre-serialized answers, a timed one and a streaming echo. */
export const loadtestRoutes: readonly Route[] = [
  {
    methods: ['GET'],
    path: '/loadtest/ping',
    description: 'tiny text body "pong"',
    handle: ({ res }) => sendBuffer(res, 200, 'text/plain', PING_BODY),
  },
  {
    methods: ['GET'],
    path: '/loadtest/get',
    description: `a ${GET_BODY.length} B JSON document (pre-serialized)`,
    handle: ({ res }) => sendBuffer(res, 200, JSON_TYPE, GET_BODY),
  },
  {
    methods: ['GET'],
    path: '/loadtest/fast',
    description: 'small pre-serialized JSON',
    handle: ({ res }) => sendBuffer(res, 200, JSON_TYPE, FAST_BODY),
  },
  {
    methods: ['GET'],
    path: '/loadtest/delay/:ms',
    description: `answers { delayedMs } after ms milliseconds (0..${MAX_DELAY_MS})`,
    handle: ({ res, params }) => {
      const ms = parseCount(params[0], MAX_DELAY_MS);
      if (ms === undefined) {
        sendBadRequest(res, `delay must be an integer number of ms in [0, ${MAX_DELAY_MS}]`);
        return;
      }
      const timer = setTimeout(() => sendJson(res, 200, { delayedMs: ms }), ms);
      // A client that leaves (or close()) must not leave a timer behind.
      res.once('close', () => clearTimeout(timer));
    },
  },
  {
    methods: ['POST'],
    path: '/loadtest/echo',
    description: 'streams the request body back as it arrives, with the same content-type',
    handle: ({ req, res }) => {
      const headers: OutgoingHttpHeaders = {
        'content-type': req.headers['content-type'] ?? 'application/octet-stream',
      };
      // A declared length is echoed so the answer is framed like the request; otherwise it is chunked.
      const length = req.headers['content-length'];
      if (length !== undefined) headers['content-length'] = length;
      res.writeHead(200, headers);
      // pipeline pauses the request whenever the response's buffer is full, and destroys both on error.
      pipeline(req, res, () => {});
    },
  },
];
