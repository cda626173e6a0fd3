import { ErrorCode, MuxSession } from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { connectLightAgent } from '../src/stacks/light-agent.js';

// The sessions scenario's light agent against a real WebSocket server playing an edge that ends the
// session instead of answering HELLO (as the edge does for an unsupported version or a bad protection
// setting): the failure must carry the edge's own reason, not a generic line.

const servers: WebSocketServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((done) => s.close(done))));
});

async function edgeThatRefuses(code: number, reason: string): Promise<string> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  server.on('connection', (socket) => {
    const session = new MuxSession({
      role: 'edge',
      transport: {
        send: (message, done) => socket.send(message, { binary: true }, done),
        close: (closeCode, closeReason) => socket.close(closeCode, closeReason),
      },
      handler: {
        onHello: () => session.close(code, reason),
        onClose: () => {},
      },
    });
    socket.on('message', (data) => session.receive(data as Buffer));
    socket.on('close', () => session.transportClosed());
  });
  await new Promise((ready) => server.once('listening', ready));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `ws://127.0.0.1:${address.port}/_tunnel2/connect`;
}

describe('light agent', () => {
  it('a session the edge ends during the handshake fails with the GOAWAY and close frame the edge sent', async () => {
    const agentUrl = await edgeThatRefuses(
      ErrorCode.VERSION_UNSUPPORTED,
      'protocol version 9 is not supported',
    );
    await expect(connectLightAgent({ agentUrl, agentKey: 'test' })).rejects.toThrow(
      'the edge closed the session during the handshake (GOAWAY VERSION_UNSUPPORTED: protocol version 9 is not ' +
        'supported; WebSocket close 1002 protocol version 9 is not supported)',
    );
  });
});
