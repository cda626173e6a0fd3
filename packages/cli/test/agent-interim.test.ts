import type { Socket } from 'node:net';
import {
  decodeResponseHead,
  encodeRequestHead,
  MAX_INTERIM_HEADS,
  type MuxSession,
  type MuxStream,
  type ResponseHead,
} from '@tunnel2/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type RequestReport, type Tunnel } from '../src/index.js';
import { startPlayedEdge } from './support/played-edge.js';
import { type RawBackend, startRawBackend } from './support/raw-backend.js';
import { until } from './support/stack.js';

// The interim (1xx) heads the agent passes on from its node:http path (an `Expect: 100-continue` request, a
// WebSocket upgrade), seen from an edge played by the test: exactly what the agent sends, before any edge
// filter. They must be what the undici path sends: hop-by-hop fields out, and at most MAX_INTERIM_HEADS of
// them per exchange (the edge's own bound), past which the exchange fails with the agent's clear 502.

const FLOOD = 1_000;

let backend: RawBackend;
/** The raw backend's socket for the flood request: the agent must close it. */
let floodSocket: Socket | undefined;
let session: MuxSession;
let tunnel: Tunnel;
let closeEdge: () => Promise<void>;
const reports: RequestReport[] = [];

beforeAll(async () => {
  backend = await startRawBackend((socket, request) => {
    if (request.path === '/hop-fields') {
      socket.write(
        'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nConnection: x-secret\r\n' +
          'X-Secret: internal\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n\r\n',
      );
      socket.write('HTTP/1.1 100 Continue\r\nKeep-Alive: timeout=5\r\n\r\n');
      return; // the final answer once the body came: the raw backend skips it by its Content-Length
    }
    if (request.path === '/flood') {
      floodSocket = socket;
      socket.write('HTTP/1.1 102 Processing\r\n\r\n'.repeat(FLOOD));
    }
  });
  let opened: (session: MuxSession) => void = () => {};
  const ready = new Promise<MuxSession>((resolve) => {
    opened = resolve;
  });
  const played = await startPlayedEdge((_hello, s) => {
    s.sendHello({ name: 'played', url: 'http://played.played/', urls: [] }, true);
    opened(s);
  });
  closeEdge = played.close;
  tunnel = await connect({ target: backend.port, server: played.url });
  tunnel.on('request', (report: RequestReport) => reports.push(report));
  session = await ready;
});

afterAll(async () => {
  await tunnel?.close(0);
  await closeEdge?.();
  await backend?.close();
});

/** A POST with Expect: 100-continue as an edge sends it; every head of its answer is listed. */
function expectRequest(target: string): { stream: MuxStream; heads: ResponseHead[]; ended: Promise<void> } {
  const stream = session.openStream();
  const heads: ResponseHead[] = [];
  let ended: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    ended = resolve;
  });
  stream.handler = {
    onHeaders: (payload) => heads.push(decodeResponseHead(payload)),
    onData: (chunk) => stream.consume(chunk.length),
    onEnd: () => ended(),
    onReset: () => ended(),
    onDrain: () => {},
  };
  const headers = ['host', 'played.played', 'expect', '100-continue', 'content-length', '5'];
  stream.sendHeaders(encodeRequestHead({ method: 'POST', target, headers }, 64 * 1024), false);
  return { stream, heads, ended: done };
}

function names(head: ResponseHead): string[] {
  return head.headers.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
}

it("an interim head's hop-by-hop fields (and those its Connection names) are not passed on", async () => {
  const { stream, heads } = expectRequest('/hop-fields');
  await until(() => heads.length >= 2);
  const [hints, continued] = heads;
  expect(hints?.status).toBe(103);
  expect(names(hints!)).toEqual(['link']);
  expect(hints?.headers[1]).toBe('</style.css>; rel=preload');
  expect(continued?.status).toBe(100);
  expect(continued?.headers).toEqual([]);
  stream.reset(0x8);
});

it(`a flood of interim heads: ${MAX_INTERIM_HEADS} pass, then the agent fails the exchange with a 502 and drops the backend`, async () => {
  const { heads, ended } = expectRequest('/flood');
  await ended;
  const interim = heads.filter((head) => head.status < 200);
  expect(interim.length).toBe(MAX_INTERIM_HEADS);
  const final = heads[heads.length - 1]!;
  expect(heads.length).toBe(MAX_INTERIM_HEADS + 1);
  expect(final.status).toBe(502);
  const fields = final.headers;
  expect(fields[fields.findIndex((f) => f.toLowerCase() === 'x-tunnel2-error') + 1]).toBe(
    'TUNNEL2_ERR_BACKEND_INVALID_RESPONSE',
  );
  await until(() => floodSocket?.destroyed === true);
  await until(() => reports.some((report) => report.path === '/flood'));
  const report = reports.find((r) => r.path === '/flood');
  expect(report?.error).toContain(`more than ${MAX_INTERIM_HEADS} interim (1xx) responses`);
}, 20_000);
