import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

/**
 * A backend that says who it is: every answer's body is its `id`, after `delayMs` (so some requests are
 * always in flight under load), and a WebSocket's first message is its `id` too. It counts what it served,
 * so a test of replicas can tell how requests and connections spread over the agents in front of these.
 */
export interface CountingBackend {
  id: string;
  port: number;
  /** Requests answered (WebSocket upgrades not included). */
  readonly requests: number;
  /** WebSocket connections accepted. */
  readonly sockets: number;
  close(): Promise<void>;
}

export async function startCountingBackend(id: string, delayMs = 5): Promise<CountingBackend> {
  let requests = 0;
  let sockets = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    const timer = setTimeout(() => {
      requests++;
      res.writeHead(200, { 'content-type': 'text/plain', 'x-backend': id });
      res.end(id);
    }, delayMs);
    res.once('close', () => clearTimeout(timer));
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => {
    sockets++;
    ws.send(id);
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  return {
    id,
    port: (server.address() as AddressInfo).port,
    get requests() {
      return requests;
    },
    get sockets() {
      return sockets;
    },
    async close() {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
