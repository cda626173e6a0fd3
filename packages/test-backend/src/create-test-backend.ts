import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deterministicChunks } from './deterministic-bytes.js';
import { endpoints } from './endpoints.js';

export interface TestBackendOptions {
  port?: number;
  host?: string;
}

export interface TestBackendStats {
  requests: number;
  /** Requests whose client went away before the response finished. */
  aborted: number;
}

export interface TestBackendEvents {
  /** A request's client went away before its response finished. */
  aborted: [url: string];
}

export interface TestBackend {
  url: string;
  port: number;
  server: Server;
  stats: TestBackendStats;
  events: EventEmitter<TestBackendEvents>;
  close(): Promise<void>;
}

// Pre-serialized bodies: the hot endpoints do no JSON work per request.
const PING = Buffer.from('pong');
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
const INFO_BODY = Buffer.from(JSON.stringify({ endpoints }, null, 2));
const JSON_TYPE = 'application/json';

function sendBody(res: ServerResponse, status: number, type: string, body: Buffer): void {
  res.writeHead(status, { 'content-type': type, 'content-length': body.length });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  sendBody(res, status, JSON_TYPE, Buffer.from(JSON.stringify(value)));
}

function parseCount(text: string | undefined, max: number): number | undefined {
  if (text === undefined || !/^\d{1,16}$/.test(text)) return undefined;
  const n = Number(text);
  return n <= max ? n : undefined;
}

/** Writes deterministic bytes honouring backpressure: the body is never built in memory. */
function streamBytes(res: ServerResponse, n: number, limit = n): void {
  const chunks = deterministicChunks(limit);
  const pump = (): void => {
    for (;;) {
      const next = chunks.next();
      if (next.done) {
        if (limit < n) res.destroy();
        else res.end();
        return;
      }
      if (!res.write(next.value)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const method = req.method ?? 'GET';

  if (path === '/loadtest/ping') {
    sendBody(res, 200, 'text/plain', PING);
    return;
  }
  if (path === '/loadtest/get') {
    sendBody(res, 200, JSON_TYPE, GET_BODY);
    return;
  }
  if (path === '/loadtest/fast') {
    sendBody(res, 200, JSON_TYPE, FAST_BODY);
    return;
  }
  if (path === '/loadtest/info') {
    sendBody(res, 200, JSON_TYPE, INFO_BODY);
    return;
  }
  if (path.startsWith('/loadtest/delay/')) {
    const ms = parseCount(path.slice('/loadtest/delay/'.length), 60_000);
    if (ms === undefined) {
      sendJson(res, 400, { error: 'delay must be an integer of ms in [0, 60000]' });
      return;
    }
    const timer = setTimeout(() => sendJson(res, 200, { delayedMs: ms }), ms);
    res.on('close', () => clearTimeout(timer));
    return;
  }
  if (path === '/loadtest/echo' && method === 'POST') {
    const headers: Record<string, string> = {
      'content-type': req.headers['content-type'] ?? 'application/octet-stream',
    };
    if (req.headers['content-length'] !== undefined)
      headers['content-length'] = req.headers['content-length'];
    res.writeHead(200, headers);
    req.pipe(res);
    return;
  }
  if (path.startsWith('/bytes/')) {
    const n = parseCount(path.slice('/bytes/'.length), 2 ** 40);
    if (n === undefined) {
      sendJson(res, 400, { error: 'n must be a non-negative integer of bytes' });
      return;
    }
    const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream' };
    if (query.get('chunked') !== '1') headers['content-length'] = n;
    res.writeHead(200, headers);
    if (method === 'HEAD') {
      res.end();
      return;
    }
    streamBytes(res, n);
    return;
  }
  if (path.startsWith('/abort-after/')) {
    const n = parseCount(path.slice('/abort-after/'.length), 2 ** 30);
    if (n === undefined) {
      sendJson(res, 400, { error: 'n must be a non-negative integer of bytes' });
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n * 2 + 1 });
    streamBytes(res, n * 2 + 1, n);
    return;
  }
  if (path.startsWith('/stream/')) {
    const chunks = parseCount(path.slice('/stream/'.length), 100_000);
    const interval = parseCount(query.get('interval') ?? '0', 60_000);
    if (chunks === undefined || interval === undefined) {
      sendJson(res, 400, { error: 'chunks and interval must be non-negative integers' });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-cache' });
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const tick = (): void => {
      if (sent >= chunks) {
        res.end();
        return;
      }
      res.write(`chunk ${sent++}\n`);
      timer = setTimeout(tick, interval);
    };
    res.on('close', () => clearTimeout(timer));
    tick();
    return;
  }
  if (path === '/upload' || path.startsWith('/echo/request')) {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    req.on('end', () => {
      const sha256 = hash.digest('hex');
      if (path === '/upload') {
        sendJson(res, 200, { bytes, sha256 });
        return;
      }
      sendJson(res, 200, { method, url, rawHeaders: req.rawHeaders, bodyLength: bytes, bodySha256: sha256 });
    });
    return;
  }
  if (path === '/headers/multi') {
    res.setHeader('Set-Cookie', ['a=1; Path=/', 'b=2; Path=/; HttpOnly']);
    res.appendHeader('X-Multi', 'a');
    res.appendHeader('X-Multi', 'b');
    sendBody(res, 200, 'text/plain', Buffer.from('multi'));
    return;
  }
  if (path.startsWith('/status/')) {
    const status = parseCount(path.slice('/status/'.length), 599);
    if (status === undefined || status < 200) {
      sendJson(res, 400, { error: 'status must be in [200, 599]' });
      return;
    }
    if (status === 204 || status === 304) {
      res.writeHead(status);
      res.end();
      return;
    }
    sendJson(res, status, { status });
    return;
  }
  sendJson(res, 404, { error: `no such endpoint: ${method} ${url}`, path: url });
}

/** Starts the backend on loopback (port 0 by default) and resolves once it listens. */
export async function createTestBackend(options: TestBackendOptions = {}): Promise<TestBackend> {
  const stats: TestBackendStats = { requests: 0, aborted: 0 };
  const events = new EventEmitter<TestBackendEvents>();
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    stats.requests++;
    res.on('close', () => {
      if (!res.writableFinished) {
        stats.aborted++;
        events.emit('aborted', req.url ?? '/');
      }
    });
    handle(req, res);
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    server,
    stats,
    events,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
