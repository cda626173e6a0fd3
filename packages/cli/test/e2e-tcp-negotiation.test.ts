import { once } from 'node:events';
import { createServer } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { ErrorCode, MuxSession } from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { AgentErrorCode, connectTcp } from '../src/index.js';
import { silent } from './support/stack.js';
import { portRange } from './support/tcp-stack.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A protocol session over a ws socket, both roles, with nothing but the handshake. */
function sessionOver(socket: WebSocket, role: 'agent' | 'edge', onHello: (session: MuxSession) => void) {
  const goAways: { code: number; reason: string }[] = [];
  const session: MuxSession = new MuxSession({
    role,
    settings: {},
    transport: {
      send: (message, done) => socket.send(message, { binary: true }, done),
      close: (code, reason) => socket.close(code, reason),
    },
    handler: {
      onHello: () => onHello(session),
      onGoAway: (goAway) => goAways.push({ code: goAway.code, reason: goAway.reason }),
      onClose: () => {},
    },
  });
  socket.on('message', (data) => session.receive(data as Buffer));
  socket.on('close', () => session.transportClosed());
  return { session, goAways };
}

describe('TCP tunnels: negotiation with older peers', () => {
  it('an agent that asks for a port without announcing TCP streams gets no TCP stream: the edge closes', async () => {
    const edge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    await edge.listen();
    cleanups.push(() => edge.close(0));
    const socket = new WebSocket(`${edge.url.replace('http', 'ws')}/_tunnel2/connect?tcp=any`);
    const { session, goAways } = sessionOver(socket, 'agent', () => {});
    socket.on('open', () => session.sendHello({ agent: 'tunnel2/0.0.1-older' }, false));
    await once(socket, 'close');
    expect(goAways[0]).toMatchObject({ code: ErrorCode.PROTOCOL_ERROR });
    expect(goAways[0]?.reason).toContain('TCP streams');
  });

  it('an agent asking an edge that predates TCP tunnels stops with a clear error', async () => {
    // An older edge ignores `tcp=` and answers with an HTTP tunnel's session info.
    const server = createServer();
    const wss = new WebSocketServer({ server });
    wss.on('connection', (socket) => {
      sessionOver(socket, 'edge', (session) =>
        session.sendHello(
          { name: 'old', url: 'http://old.localhost/', urls: ['http://old.localhost/'] },
          true,
        ),
      );
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    cleanups.push(() => {
      wss.close();
      server.close();
    });
    const { port } = server.address() as { port: number };
    await expect(connectTcp({ target: 1, server: `http://127.0.0.1:${port}` })).rejects.toMatchObject({
      code: AgentErrorCode.TCP_UNSUPPORTED,
      fatal: true,
    });
  });
});
