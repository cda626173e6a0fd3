import type { Socket } from 'node:net';
import { bridgeSocket, ErrorCode, encodeTcpHead } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { normalizeAddress } from '../client-address.js';
import type { InFlight } from '../in-flight.js';
import type { TcpCounters } from '../tcp-connection.js';
import type { Cluster } from './cluster.js';
import type { OwnerEntry } from './owner-cache.js';

export interface TcpCarryContext {
  cluster: Cluster;
  counters: TcpCounters;
  inFlight: InFlight;
  /** Carried sockets open now (reset when the edge closes). */
  sockets: Set<Socket>;
  logger: Logger;
  /**
   * Called instead of resetting the client when the holder could not be reached (nothing was read from
   * the client yet): the caller asks who holds the port now and carries the connection there.
   */
  unreachable?: () => void;
}

/**
 * A public client's connection to a port another node holds: carried over the link to that node as one
 * stream opened with the TCP head (the port, and the client's real address for the holder's allow-list),
 * then bytes both ways under the link's flow control, FIN as END_STREAM and RST as RESET, exactly as
 * between an edge and its agent (the same bridge). Nothing is read from the client before the link stream
 * is open. A peer that does not list TCP streams in its link HELLO (an older node), a link that cannot be
 * opened, or a holder that refuses: the client is reset, as a port without an agent is on one node.
 */
export function carryTcpConnection(
  socket: Socket,
  port: number,
  owner: OwnerEntry,
  context: TcpCarryContext,
): void {
  const { cluster, counters } = context;
  const links = cluster.links;
  const refuse = (): void => {
    counters.connections.refused++;
    socket.resetAndDestroy();
  };
  if (links === undefined) {
    refuse();
    return;
  }
  context.inFlight.start();
  context.sockets.add(socket);
  const clientAddress = normalizeAddress(socket.remoteAddress ?? '');
  const clientPort = socket.remotePort ?? 0;
  let bridged = false;
  const done = (): void => {
    context.sockets.delete(socket);
    context.inFlight.finish();
  };
  links.open(owner.url, (opening) => {
    try {
      if ('failed' in opening) {
        if (opening.failed === 'unreachable') {
          context.logger.debug({ err: opening.err, port, holder: owner.nodeId }, 'TCP: holder unreachable');
          cluster.unreachable(owner);
          if (context.unreachable !== undefined && !socket.destroyed) {
            context.unreachable();
            return;
          }
        }
        refuse();
        return;
      }
      const { stream } = opening;
      if (socket.destroyed || !opening.tcp) {
        stream.reset(ErrorCode.CANCEL);
        if (!socket.destroyed) refuse();
        return;
      }
      stream.sendHeaders(encodeTcpHead({ port, clientAddress, clientPort }), false);
      counters.connections.forwarded++;
      counters.open++;
      bridged = true;
      bridgeSocket(stream, socket, {
        socketResetCode: () => ErrorCode.CANCEL,
        onClose: (result) => {
          counters.open--;
          counters.bytes.in += result.bytesFromSocket;
          counters.bytes.out += result.bytesToSocket;
          // "Not here": the port moved or its session ended; the next connection asks the registry.
          if (result.resetCode === ErrorCode.REFUSED_STREAM && result.resetBy === 'stream')
            cluster.notHere(`tcp:${port}`, owner);
          done();
        },
      });
    } finally {
      if (!bridged) done();
    }
  });
}
