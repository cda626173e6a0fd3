import type { Socket } from 'node:net';
import { bridgeSocket, ErrorCode, encodeTcpHead, encodeTunnelTag, type MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { normalizeAddress } from '../access/client-address.js';
import type { TcpPort } from '../agents/tcp-port.js';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
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

/** How often one connection may be refused by a replica going away and carried to another. */
const MAX_REFUSALS = 2;

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
  const head = encodeTcpHead({ port: port.port, clientAddress, clientPort: socket.remotePort ?? 0 });
  // The session's stream limit (maxStreamsPerSession) counts TCP connections too, without a wait: a TCP
  // client retries a refused connection itself.
  const open = (on: TunnelEntry): MuxStream | undefined => {
    let opened: MuxStream | undefined;
    try {
      opened = on.slots.tryOpen();
      // A tunnel the agent listed in its HELLO: the tag says which of its tunnels the connection is for.
      opened?.sendHeaders(on.tag === 0 ? head : encodeTunnelTag(on.tag, head), false);
      return opened;
    } catch (err) {
      // The session is closing or draining.
      logger.debug({ err, port: port.port }, 'TCP connection refused: no stream');
      opened?.reset(ErrorCode.CANCEL);
      return undefined;
    }
  };
  const stream = open(connection);
  if (stream === undefined) {
    counters.connections.refused++;
    socket.resetAndDestroy();
    return;
  }
  counters.connections.accepted++;
  counters.open++;
  inFlight?.start();
  port.sockets.add(socket);
  let refusals = 0;
  let via = connection;
  bridgeSocket(stream, socket, {
    socketResetCode: () => ErrorCode.CANCEL,
    // A replica whose agent is going away refused the connection before taking it (its GOAWAY crossed
    // the stream): another live replica of the port takes it, as a refused request goes to another one.
    refused: () => {
      if (++refusals > MAX_REFUSALS) return undefined;
      const next = port.pick(via);
      if (next === undefined || next === via || !next.ready || next.session.draining) return undefined;
      via = next;
      return open(next);
    },
    onClose: (result) => {
      inFlight?.finish();
      port.sockets.delete(socket);
      counters.open--;
      counters.bytes.in += result.bytesFromSocket;
      counters.bytes.out += result.bytesToSocket;
    },
  });
}
