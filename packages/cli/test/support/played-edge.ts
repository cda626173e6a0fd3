import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Hello, MuxSession, type ProtocolSettings } from '@tunnel2/protocol';
import { WebSocketServer } from 'ws';

/**
 * An edge played from @tunnel2/protocol, for what a real edge never sends: each agent's HELLO goes to
 * `onHello`, which answers it (or not) on the agent's session (with `settings` of its own, e.g. a small frame). Returns the URL to give as --server, and a
 * close that ends every session and the listener.
 */
export async function startPlayedEdge(
  onHello: (hello: Hello, session: MuxSession) => void,
  settings: Partial<ProtocolSettings> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const http = createServer();
  const wss = new WebSocketServer({ server: http, perMessageDeflate: false });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  wss.on('connection', (ws) => {
    const session: MuxSession = new MuxSession({
      role: 'edge',
      settings: { heartbeatIntervalMs: 0, ...settings },
      transport: {
        send: (message, done) => ws.send(message, { binary: true }, done),
        close: () => ws.close(),
      },
      handler: {
        onHello: (hello: Hello) => onHello(hello, session),
        onClose: () => {},
      },
    });
    ws.on('message', (data) => session.receive(data as Buffer));
    ws.on('close', () => session.transportClosed());
  });
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    async close() {
      for (const client of wss.clients) client.terminate();
      wss.close();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
