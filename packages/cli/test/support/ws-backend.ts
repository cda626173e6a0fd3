import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export interface WsBackend {
  port: number;
  server: Server;
  wss: WebSocketServer;
  close(): Promise<void>;
}

/**
 * A backend with a real WebSocket server: `/echo` echoes every message (text or binary, as received) and
 * answers pings, `/close` closes with code 4001 and a reason after the first message, anything on
 * `/forbidden` is refused with 403 and a body. Plain HTTP requests get a small text answer.
 */
export async function startWsBackend(): Promise<WsBackend> {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`plain ${req.method} ${req.url} upgrade=${req.headers.upgrade ?? 'none'}`);
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 256 * 1024 * 1024,
    perMessageDeflate: false,
  });
  server.on('upgrade', (req, socket, head) => {
    if (req.url === '/forbidden') {
      socket.end(
        'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nnot allowed!\r\n',
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => {
        if (req.url === '/close') ws.close(4001, 'backend says bye');
        else ws.send(data, { binary: isBinary });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    wss,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
