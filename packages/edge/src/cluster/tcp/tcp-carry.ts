import type { Socket } from 'node:net';
import { bridgeSocket, ErrorCode, encodeTcpHead, type MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { normalizeAddress } from '../../access/client-address.js';
import type { InFlight } from '../../exchange/in-flight.js';
import type { OwnerEntry } from '../../public/cross-node.js';
import type { TcpCounters } from '../../tcp/tcp-connection.js';
import type { Cluster } from '../cluster.js';

export interface TcpCarryContext {
  cluster: Cluster;
  counters: TcpCounters;
  inFlight: InFlight;
  /** Carried sockets open now (reset when the edge closes). */
  sockets: Set<Socket>;
  logger: Logger;
  /**
   * Called instead of resetting the client when the holder could not be reached or answered "not here"
   * before taking the connection (nothing was sent on yet: what Node read stays in the socket's buffer):
   * the caller asks who holds the port now and carries the connection there.
   */
  unreachable?: () => void;
}

/** The holder's answer on a carried connection's link stream once its agent's stream is open: an empty head. */
export const TCP_ACCEPTED: Buffer = Buffer.alloc(0);

/**
 * A public client's connection to a port another node holds: carried over the link to that node as one
 * stream opened with the TCP head (the port, and the client's real address for the holder's allow-list),
 * then bytes both ways under the link's flow control, FIN as END_STREAM and RST as RESET, exactly as
 * between an edge and its agent (the same bridge). Nothing is sent on before the holder has taken the
 * connection: Node reads up to the socket's high-water mark (64 KiB) into its buffer meanwhile, and the
 * bridge sends that first, so no byte is lost. A peer that does not list TCP streams in its link HELLO (an
 * older node), a link that cannot be opened, or a holder that refuses: the client is reset, as a port
 * without an agent is on one node.
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
  const tenant = { session: `tcp:${port}`, account: owner.account, client: clientAddress };
  links.open(owner, tenant, (opening) => {
    try {
      if ('failed' in opening) {
        if (opening.failed === 'unreachable' || opening.failed === 'misdirected') {
          if (opening.failed === 'unreachable') {
            context.logger.debug({ err: opening.err, port, holder: owner.nodeId }, 'TCP: holder unreachable');
            cluster.unreachable(owner);
          } else {
            // The holder's node id left its address (another node answers there): asked again all the same.
            cluster.gone(owner);
          }
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
      bridged = true;
      // Nothing is sent on until the holder has taken the connection (its empty head): a "not here"
      // before that (the owner cache named a node the port has just left) is asked again.
      stream.handler = {
        onHeaders: () => bridge(stream),
        onData: () => {},
        onEnd: () => {},
        onReset: (error) => {
          if (error.protocolCode === ErrorCode.REFUSED_STREAM) {
            cluster.notHere(`tcp:${port}`, owner);
            if (context.unreachable !== undefined && !socket.destroyed) {
              // Asked again first: the caller counts it in flight again before this carry stops counting.
              context.unreachable();
              done();
              return;
            }
          }
          if (!socket.destroyed) refuse();
          done();
        },
        onDrain: () => {},
      };
    } finally {
      if (!bridged) done();
    }
  });

  function bridge(stream: MuxStream): void {
    if (socket.destroyed) {
      stream.reset(ErrorCode.CANCEL);
      done();
      return;
    }
    counters.connections.forwarded++;
    counters.open++;
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
  }
}
