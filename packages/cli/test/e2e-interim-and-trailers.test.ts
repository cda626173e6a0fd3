import { once } from 'node:events';
import { type IncomingHttpHeaders, type IncomingMessage, request } from 'node:http';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { rawExchange } from './support/raw-client.js';
import { type SemanticsBackend, startSemanticsBackend } from './support/semantics-backend.js';
import { silent } from './support/stack.js';

// Heads other than the final one: interim (1xx) responses before it, trailers after the body.

let backend: SemanticsBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  backend = await startSemanticsBackend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'interim' });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

/** The two public URL forms of one backend path: request target and Host. */
function forms(path: string): { via: string; target: string; host: string }[] {
  return [
    { via: 'host', target: path, host: `interim.localhost:${port}` },
    { via: 'path', target: `/session/interim${path}`, host: `localhost:${port}` },
  ];
}

interface Observed {
  /** Interim responses and then the final one, in arrival order. */
  sequence: { status: number; headers: IncomingHttpHeaders }[];
  body: string;
  trailers: NodeJS.Dict<string>;
}

/** A node:http client that records each 'information' event and the final response in order. */
function observe(target: string, host: string): Promise<Observed> {
  return new Promise((resolve, reject) => {
    const sequence: Observed['sequence'] = [];
    const req = request({ host: '127.0.0.1', port, path: target, headers: { host }, agent: false });
    req.on('information', (info) => sequence.push({ status: info.statusCode, headers: info.headers }));
    req.on('error', reject);
    req.on('response', (res) => {
      sequence.push({ status: res.statusCode ?? 0, headers: res.headers });
      let body = '';
      res.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.on('end', () => resolve({ sequence, body, trailers: res.trailers }));
    });
    req.end();
  });
}

const links = ['</style.css>; rel=preload; as=style', '</app.js>; rel=preload; as=script'];

describe('interim responses', () => {
  for (const form of forms('/early-hints')) {
    it(`relays 103 Early Hints with its Link fields before the final response (${form.via} form)`, async () => {
      const text = await rawExchange(
        port,
        `GET ${form.target} HTTP/1.1\r\nHost: ${form.host}\r\nConnection: close\r\n\r\n`,
      );
      const [hints = '', rest = ''] = text.split(/\r\n\r\n(.*)/s);
      expect(hints).toMatch(/^HTTP\/1\.1 103 Early Hints\r\n/);
      for (const link of links) expect(hints).toContain(link);
      expect(rest).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(rest).toMatch(/after hints$/);

      const seen = await observe(form.target, form.host);
      expect(seen.sequence.map((r) => r.status)).toEqual([103, 200]);
      for (const link of links) expect(seen.sequence[0]?.headers.link).toContain(link);
      expect(seen.sequence[1]?.headers.link).toBeUndefined();
      expect(seen.body).toBe('after hints');
    });
  }

  it('relays another 1xx (102 with a field) as it was sent', async () => {
    const text = await rawExchange(
      port,
      `GET /processing HTTP/1.1\r\nHost: interim.localhost:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 102 Processing\r\nX-Progress: 50%\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
    expect(text).toMatch(/processed$/);
  });

  it('sends no 1xx to an HTTP/1.0 client (RFC 9110 §15.2), only the final response', async () => {
    const text = await rawExchange(
      port,
      `GET /early-hints HTTP/1.0\r\nHost: interim.localhost:${port}\r\n\r\n`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).not.toContain('103');
    expect(text).toMatch(/after hints$/);
  });
});

describe('trailers', () => {
  for (const form of forms('/trailers')) {
    it(`arrive as trailers, never merged into the header section (${form.via} form)`, async () => {
      const res = await send({ port, path: form.target, headers: ['Host', form.host] });
      expect(res.body.toString()).toBe('chunked body');
      expect(res.headers['x-checksum']).toBeUndefined();
      expect(res.headers['x-status']).toBeUndefined();
      expect(res.trailers).toEqual({ 'x-checksum': 'sha256-abc', 'x-status': 'done' });

      const text = await rawExchange(
        port,
        `GET ${form.target} HTTP/1.1\r\nHost: ${form.host}\r\nConnection: close\r\n\r\n`,
      );
      const [head = '', body = ''] = text.split(/\r\n\r\n(.*)/s);
      expect(head).not.toMatch(/x-checksum|x-status/i);
      expect(head).toMatch(/transfer-encoding: chunked/i);
      expect(body).toMatch(/\r\n0\r\nx-checksum: sha256-abc\r\nx-status: done\r\n\r\n$/);
    });
  }

  it('arrive as trailers on the Expect: 100-continue path too', async () => {
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/expect/trailers',
        headers: { host: `interim.localhost:${port}`, expect: '100-continue', 'content-length': 5 },
        agent: false,
      });
      req.on('continue', () => req.end('hello'));
      req.on('error', reject);
      req.on('response', resolve);
    });
    let body = '';
    res.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    await once(res, 'end');
    expect(body).toBe('received 5 bytes');
    expect(res.headers['x-received']).toBeUndefined();
    expect(res.trailers).toEqual({ 'x-received': '5' });
  });
});
