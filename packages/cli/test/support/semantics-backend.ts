import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SemanticsBackend {
  port: number;
  server: Server;
  /** Bodies the backend received on /expect, by request. */
  received: number[];
  /** Resolves with the next /idle-sse stream the backend opens. */
  nextIdleStream(): Promise<IdleStream>;
  close(): Promise<void>;
}

/** An open /idle-sse response: `send` writes the last event and ends; `closed` settles on 'close'. */
export interface IdleStream {
  send(data: string): void;
  closed: Promise<unknown>;
}

/**
 * A backend for the HTTP edge cases an intermediary must keep:
 * /sse writes an event every `interval` ms carrying its write time; /expect/accept and /expect/reject answer
 * an Expect: 100-continue request by continuing (/expect/trailers adds a trailer) or with an early 417; /early-hints sends a 103 first;
 * /processing a raw 102 with a field; /trailers a chunked body with trailers; /idle-sse one event and then
 * silence until the test sends the next; /hang no answer at all; /head, /no-content, /not-modified exercise bodiless responses.
 */
export async function startSemanticsBackend(): Promise<SemanticsBackend> {
  const received: number[] = [];
  let onStream: ((stream: IdleStream) => void) | undefined;
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
    if (url.pathname === '/processing') {
      // Node has no API for a 1xx with fields other than 103, so this one is written raw.
      res.socket?.write('HTTP/1.1 102 Processing\r\nX-Progress: 50%\r\n\r\n');
      res.end('processed');
      return;
    }
    if (url.pathname === '/trailers') {
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum, x-status' });
      res.write('chunked ');
      res.addTrailers({ 'x-checksum': 'sha256-abc', 'x-status': 'done' });
      res.end('body');
      return;
    }
    if (url.pathname === '/idle-sse') {
      // One event, then silence until the test asks for the next one (or the client goes away).
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('data: first\n\n');
      const stream = {
        send: (data: string) => res.end(`data: ${data}\n\n`),
        closed: new Promise((resolve) => res.on('close', resolve)),
      };
      onStream?.(stream);
      return;
    }
    if (url.pathname === '/hang') return; // never answers: the edge's response timeout must
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
      if (req.url === '/expect/trailers') {
        // A write before end makes the body chunked; only a chunked body can carry trailers.
        res.write(`received ${bytes} bytes`);
        res.addTrailers({ 'x-received': String(bytes) });
        res.end();
        return;
      }
      res.end(`received ${bytes} bytes`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    received,
    nextIdleStream: () =>
      new Promise<IdleStream>((resolve) => {
        onStream = (stream) => {
          onStream = undefined;
          resolve(stream);
        };
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
