import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type Server, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { type Dispatcher, Pool } from 'undici';
import { endToEnd, FrameKind, FrameReader, FrameWriter } from './http-relay-frames.js';

/*
 * One half of the HTTP floor of `pnpm bench floor`: the least an HTTP-aware Node.js tunnel of tunnel2's
 * shape can do. The edge-like half is a node:http server that sends each request's head (method, target,
 * raw headers), body chunks and end over ONE shared TCP connection; the agent-like half makes each request
 * to the backend with an undici Pool configured as tunnel2's agent configures its own, and sends the
 * response's head, body and end back. Between them: no routing, auth, limits, per-stream flow control,
 * forwarding headers or error pages; only the connection's own backpressure. What this costs beyond the
 * byte relay (relay-floor-process.ts) is what parsing and writing HTTP at both ends costs.
 *
 *   node http-relay-floor-process.js --role agent --backend <url>   (listens for the one edge connection)
 *   node http-relay-floor-process.js --role edge --upstream <url>   (listens for clients)
 *
 * Each prints `{"event":"listening","url":...}` once ready.
 */

type DispatchController = Dispatcher.DispatchController;

/** The agent-like half of one request: frames in, an undici request out, the response back as frames. */
class BackendExchange implements Dispatcher.DispatchHandler {
  readonly #id: number;
  readonly #link: AgentLink;
  readonly body: Readable | null;
  #controller: DispatchController | undefined;

  constructor(id: number, link: AgentLink, hasBody: boolean) {
    this.#id = id;
    this.#link = link;
    // No flow control toward the edge (a floor has none): the body queues here until undici reads it.
    this.body = hasBody ? new Readable({ read() {} }) : null;
  }

  /** The edge gave up on the request (its client went away). */
  cancel(): void {
    this.body?.destroy();
    if (this.#controller !== undefined && !this.#controller.aborted) {
      this.#controller.abort(new Error('cancelled by the edge'));
    }
  }

  onRequestStart(controller: DispatchController): void {
    this.#controller = controller;
  }

  onResponseStart(controller: DispatchController, status: number, _h: unknown, message?: string): void {
    if (status < 200) return; // interim heads are not relayed
    const raw = controller.rawHeaders;
    const headers = Array.isArray(raw)
      ? raw.map((v) => (typeof v === 'string' ? v : v.toString('latin1')))
      : [];
    const head = JSON.stringify([status, message ?? '', endToEnd(headers)]);
    this.#link.writer.send(this.#id, FrameKind.HEAD, Buffer.from(head, 'latin1'));
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    if (!this.#link.writer.send(this.#id, FrameKind.DATA, chunk)) this.#link.pauseUntilDrain(controller);
  }

  onResponseEnd(): void {
    if (this.#link.exchanges.delete(this.#id)) this.#link.writer.send(this.#id, FrameKind.END);
  }

  onResponseError(_controller: DispatchController, error: Error): void {
    this.body?.destroy();
    if (!this.#link.exchanges.delete(this.#id)) return;
    this.#link.writer.send(this.#id, FrameKind.RESET);
    process.stderr.write(`http relay agent: request ${this.#id} failed: ${error.message}\n`);
  }
}

interface AgentLink {
  writer: FrameWriter;
  exchanges: Map<number, BackendExchange>;
  pauseUntilDrain(controller: DispatchController): void;
}

function serveLink(socket: Socket, pool: Pool, backend: URL): void {
  socket.setNoDelay(true);
  const paused = new Set<DispatchController>();
  const link: AgentLink = {
    writer: new FrameWriter(socket),
    exchanges: new Map(),
    pauseUntilDrain: (controller) => {
      controller.pause();
      paused.add(controller);
    },
  };
  const reader = new FrameReader((id, kind, payload) => {
    if (kind === FrameKind.HEAD || kind === FrameKind.HEAD_END) {
      const [method, path, headers] = JSON.parse(payload.toString('latin1')) as [string, string, string[]];
      const exchange = new BackendExchange(id, link, kind === FrameKind.HEAD);
      link.exchanges.set(id, exchange);
      // The options of tunnel2's agent: its timeouts belong to the edge.
      pool.dispatch(
        {
          origin: backend.origin,
          method,
          path,
          headers,
          body: exchange.body,
          headersTimeout: 0,
          bodyTimeout: 0,
        },
        exchange,
      );
      return;
    }
    const exchange = link.exchanges.get(id);
    if (exchange === undefined) return;
    if (kind === FrameKind.DATA) exchange.body?.push(payload);
    else if (kind === FrameKind.END) exchange.body?.push(null);
    else if (kind === FrameKind.RESET) {
      link.exchanges.delete(id);
      exchange.cancel();
    }
  });
  socket.on('data', (chunk: Buffer) => reader.push(chunk));
  socket.on('drain', () => {
    for (const controller of paused) controller.resume();
    paused.clear();
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    for (const exchange of link.exchanges.values()) exchange.cancel();
    link.exchanges.clear();
  });
}

function runAgent(backend: URL): void {
  // As tunnel2's agent creates its Pool (packages/cli/src/session/tunnel.ts), one request per connection.
  const pool = new Pool(backend.origin, {
    connections: 256,
    keepAliveTimeout: 30_000,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  announceWhenListening(createNetServer((socket) => serveLink(socket, pool, backend)));
}

/** A request has a body when it declares a non-zero length or uses a transfer coding (RFC 9112 §6.3). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined ? length !== '0' : req.headers['transfer-encoding'] !== undefined;
}

function runEdge(upstream: URL): void {
  const socket = connect(Number(upstream.port), upstream.hostname);
  socket.setNoDelay(true);
  const writer = new FrameWriter(socket);
  const responses = new Map<number, ServerResponse>();
  const pausedRequests = new Set<IncomingMessage>();
  let lastId = 0;
  const reader = new FrameReader((id, kind, payload) => {
    const res = responses.get(id);
    if (res === undefined) return;
    if (kind === FrameKind.HEAD) {
      const [status, message, headers] = JSON.parse(payload.toString('latin1')) as [number, string, string[]];
      res.writeHead(status, message, headers);
    } else if (kind === FrameKind.DATA) {
      res.write(payload); // no per-stream flow control: a slow client's bytes queue in its socket
    } else if (kind === FrameKind.END || kind === FrameKind.RESET) {
      responses.delete(id);
      if (kind === FrameKind.END) res.end();
      else if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    }
  });
  socket.on('data', (chunk: Buffer) => reader.push(chunk));
  socket.on('drain', () => {
    for (const req of pausedRequests) req.resume();
    pausedRequests.clear();
  });
  socket.on('error', (err) => {
    process.stderr.write(`http relay edge: the link to ${upstream.href} failed: ${err.message}\n`);
    process.exit(1);
  });
  const server = createHttpServer((req, res) => {
    lastId = (lastId + 1) >>> 0;
    const id = lastId;
    responses.set(id, res);
    res.on('close', () => {
      if (responses.delete(id)) writer.send(id, FrameKind.RESET);
    });
    const head = Buffer.from(JSON.stringify([req.method, req.url, endToEnd(req.rawHeaders)]), 'latin1');
    if (!hasBody(req)) {
      writer.send(id, FrameKind.HEAD_END, head);
      return;
    }
    writer.send(id, FrameKind.HEAD, head);
    req.on('data', (chunk: Buffer) => {
      if (!writer.send(id, FrameKind.DATA, chunk)) {
        req.pause();
        pausedRequests.add(req);
      }
    });
    req.on('end', () => writer.send(id, FrameKind.END));
  });
  socket.once('connect', () => announceWhenListening(server));
}

function announceWhenListening(server: Server | ReturnType<typeof createHttpServer>): void {
  server.once('listening', () => {
    const bound = server.address();
    const port = bound !== null && typeof bound === 'object' ? bound.port : 0;
    process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
  });
  server.listen(0, '127.0.0.1');
}

const { values } = parseArgs({
  options: { role: { type: 'string' }, backend: { type: 'string' }, upstream: { type: 'string' } },
});
const address = values.role === 'agent' ? values.backend : values.upstream;
if (address === undefined || !URL.canParse(address) || (values.role !== 'agent' && values.role !== 'edge')) {
  process.stderr.write(
    'usage: http-relay-floor-process --role agent --backend <url> | --role edge --upstream <url>\n',
  );
  process.exit(2);
} else if (values.role === 'agent') runAgent(new URL(address));
else runEdge(new URL(address));
