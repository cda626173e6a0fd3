import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { rawExchange } from './support/raw-client.js';
import { silent } from './support/stack.js';

// What an intermediary must keep byte for byte (header order, case, repeated names, odd values) and what it
// must refuse before anything reaches the backend (ambiguous or malformed framing in the request head).

// Interleaved names, repeats, case, inner whitespace, obs-text (latin1 é) and an empty value.
const responseFields = [
  'X-B',
  '1',
  'x-a',
  'two  spaces',
  'Set-Cookie',
  'a=1; Path=/',
  'X-B',
  '3',
  'set-cookie',
  'b=2; HttpOnly',
  'X-Latin1',
  'caf\u00e9',
  'X-Empty',
  '',
];

let server: Server;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
const seen: { url: string; rawHeaders: string[] }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', rawHeaders: req.rawHeaders });
    req.resume();
    if (req.url === '/ordered') {
      res.writeHead(200, responseFields);
      res.end('ordered');
      return;
    }
    res.end('ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({
    target: (server.address() as AddressInfo).port,
    server: edge.url,
    subdomain: 'wire',
  });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  server.closeAllConnections();
  server.close();
});

/** The field lines of a raw response head, as [name, value] pairs in wire order. */
function fieldLines(text: string): [string, string][] {
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  return head
    .split('\r\n')
    .slice(1)
    .map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon), line.slice(colon + 1).trim()];
    });
}

describe('header fidelity', () => {
  for (const via of ['host', 'path'] as const) {
    it(`response fields keep their order, case, repeats and exact values (${via} form)`, async () => {
      const [target, host] =
        via === 'host'
          ? ['/ordered', `wire.localhost:${port}`]
          : ['/session/wire/ordered', `localhost:${port}`];
      const text = await rawExchange(
        port,
        `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      const backendNames = new Set(['x-b', 'x-a', 'set-cookie', 'x-latin1', 'x-empty']);
      const relayed = fieldLines(text).filter(([name]) => backendNames.has(name.toLowerCase()));
      const expected: [string, string][] = [];
      for (let i = 0; i < responseFields.length; i += 2)
        expected.push([responseFields[i]!, responseFields[i + 1]!]);
      expect(relayed).toEqual(expected);
      expect(text).toMatch(/\r\n\r\n7\r\nordered\r\n0\r\n\r\n$/);
    });
  }

  it('request fields reach the backend in order, with their case, repeats and exact values', async () => {
    const fields = [
      'X-Z: 1',
      'x-a: two  spaces',
      'X-Z: 3',
      'Cookie: a=1',
      'X-Latin1: caf\u00e9',
      'X-Empty: ',
    ];
    seen.length = 0;
    await rawExchange(
      port,
      `GET /echo HTTP/1.1\r\nHost: wire.localhost:${port}\r\n${fields.join('\r\n')}\r\nConnection: close\r\n\r\n`,
    );
    const raw = seen[0]?.rawHeaders ?? [];
    const names = new Set(['x-z', 'x-a', 'cookie', 'x-latin1', 'x-empty']);
    const got: string[] = [];
    for (let i = 0; i < raw.length; i += 2) {
      if (names.has(raw[i]!.toLowerCase())) got.push(`${raw[i]}: ${raw[i + 1]}`);
    }
    expect(got).toEqual(fields);
  });
});

describe('ambiguous or malformed request framing is refused with 400 before the backend', () => {
  const cases: [string, string][] = [
    [
      'Transfer-Encoding with Content-Length',
      'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    ['two different Content-Lengths', 'Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello'],
    ['a non-numeric Content-Length', 'Content-Length: abc\r\n\r\n'],
    ['a Transfer-Encoding that does not end in chunked', 'Transfer-Encoding: chunked, gzip\r\n\r\n'],
    ['an obsolete line fold', 'X-Folded: a\r\n b\r\nContent-Length: 0\r\n\r\n'],
    ['a space before the colon', 'Content-Length : 5\r\n\r\nhello'],
  ];
  for (const [what, rest] of cases) {
    it(what, async () => {
      seen.length = 0;
      const text = await rawExchange(
        port,
        `POST /framing HTTP/1.1\r\nHost: wire.localhost:${port}\r\n${rest}`,
      );
      expect(text).toMatch(/^HTTP\/1\.1 400 /);
      expect(seen).toEqual([]);
    });
  }
});
