import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SemanticsBackend {
  port: number;
  server: Server;
  /** Bodies the backend received on /expect, by request. */
  received: number[];
  close(): Promise<void>;
}

/**
 * A backend for the HTTP edge cases an intermediary must keep:
 * /sse writes an event every `interval` ms carrying its write time; /expect/accept and /expect/reject answer
 * an Expect: 100-continue request by continuing or with an early 417; /early-hints sends a 103 first;
 * /head, /no-content, /not-modified exercise bodiless responses.
 */
export async function startSemanticsBackend(): Promise<SemanticsBackend> {
  const received: number[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://backend');
    if (url.pathname === '/sse') {
      const count = Number(url.searchParams.get('count') ?? 5);
      const interval = Number(url.searchParams.get('interval') ?? 100);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      let sent = 0;
      const timer = setInterval(() => {
        res.write(`id: ${sent}\ndata: ${Date.now()}\n\n`);
        if (++sent === count) {
          clearInterval(timer);
          res.end();
        }
      }, interval);
      res.on('close', () => clearInterval(timer));
      return;
    }
    if (url.pathname === '/early-hints') {
      res.writeEarlyHints({
        link: ['</style.css>; rel=preload; as=style', '</app.js>; rel=preload; as=script'],
      });
      res.end('after hints');
      return;
    }
    if (url.pathname === '/no-content') {
      res.writeHead(204, { 'x-kind': 'no-content' });
      res.end();
      return;
    }
    if (url.pathname === '/not-modified') {
      res.writeHead(304, { etag: '"v1"' });
      res.end();
      return;
    }
    if (url.pathname === '/head') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 11 });
      res.end(req.method === 'HEAD' ? undefined : 'hello there');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  server.on('checkContinue', (req, res) => {
    if (req.url === '/expect/reject') {
      res.writeHead(417, { 'content-type': 'text/plain' });
      res.end('too big, do not send it');
      return;
    }
    res.writeContinue();
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      received.push(bytes);
      res.end(`received ${bytes} bytes`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
