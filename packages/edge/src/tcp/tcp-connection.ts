import type { Socket } from 'node:net';
import { bridgeSocket, ErrorCode, encodeTcpHead, encodeTunnelTag, type MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { normalizeAddress } from '../access/client-address.js';
import type { TcpPort } from '../agents/tcp-port.js';
import type { InFlight } from '../exchange/in-flight.js';

/** What the metrics read at scrape time; nothing is labelled per connection. */
export interface TcpCounters {
  /**
   * accepted (carried to the agent), forbidden (allow-list), no_agent (no session), refused (no stream),
   * forwarded (cluster: carried to the node holding the port, which counts its outcome).
   */
  connections: { accepted: number; forbidden: number; no_agent: number; refused: number; forwarded: number };
  /** in: from public clients to agents; out: from agents to public clients. */
  bytes: { in: number; out: number };
  open: number;
  /** Cluster: connections waiting, nothing sent on yet, for their port's agent to be served again (tcp-hold.ts). */
  held: number;
}

/**
 * One public client's connection to a TCP tunnel's port: refused at once (RST) when no session serves the
 * port, the client's address is not allowed, or the session cannot take another stream; otherwise carried
 * as one TCP stream to the agent, bytes both ways under the stream's flow control.
 */
export function acceptTcpConnection(
  port: TcpPort,
  socket: Socket,
  counters: TcpCounters,
  logger: Logger,
  /** Counted as in flight while open: a draining edge waits for the connection as for a request. */
  inFlight?: InFlight,
): void {
  const clientAddress = normalizeAddress(socket.remoteAddress ?? '');
  const connection = port.pick();
  if (connection === undefined || !connection.ready) {
    counters.connections.no_agent++;
    socket.resetAndDestroy();
    return;
  }
  if (connection.protection !== undefined && !connection.protection.check(undefined, clientAddress).ok) {
    counters.connections.forbidden++;
    socket.resetAndDestroy();
    return;
  }
  // The session's stream limit (maxStreamsPerSession) counts TCP connections too, without a wait: a TCP
  // client retries a refused connection itself.
  let stream: MuxStream | undefined;
  try {
    stream = connection.slots.tryOpen();
    const head = encodeTcpHead({ port: port.port, clientAddress, clientPort: socket.remotePort ?? 0 });
    // A tunnel the agent listed in its HELLO: the tag says which of its tunnels the connection is for.
    stream?.sendHeaders(connection.tag === 0 ? head : encodeTunnelTag(connection.tag, head), false);
  } catch (err) {
    // The session is closing or draining.
    logger.debug({ err, port: port.port }, 'TCP connection refused: no stream');
    stream?.reset(ErrorCode.CANCEL);
    stream = undefined;
  }
  if (stream === undefined) {
    counters.connections.refused++;
    socket.resetAndDestroy();
    return;
  }
  counters.connections.accepted++;
  counters.open++;
  inFlight?.start();
  port.sockets.add(socket);
  bridgeSocket(stream, socket, {
    socketResetCode: () => ErrorCode.CANCEL,
    onClose: (result) => {
      inFlight?.finish();
      port.sockets.delete(socket);
      counters.open--;
      counters.bytes.in += result.bytesFromSocket;
      counters.bytes.out += result.bytesToSocket;
    },
  });
}
