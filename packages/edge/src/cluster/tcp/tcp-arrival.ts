import { ErrorCode, encodeTcpHead, encodeTunnelTag, type MuxStream, type TcpHead } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { TcpPort } from '../../agents/tcp-port.js';
import type { TcpCounters } from '../../tcp/tcp-connection.js';
import { StreamSplice } from '../link/stream-splice.js';
import { TCP_ACCEPTED } from './tcp-carry.js';

export interface TcpArrivalContext {
  counters: TcpCounters;
  logger: Logger;
  /** The link stream is taken: the ingress counts it from now on. */
  started: (link: MuxStream) => void;
}

/**
 * A connection another node carried here for `held` (the port as held here, if it is): spliced to the
 * session serving it — of several replicas here, the one with the fewest open connections, a draining one
 * only if no other can take it — or refused: "not here" (REFUSED_STREAM, the ingress asks again elsewhere)
 * when no session here can take it, CANCEL when the allow-list forbids the client or no stream can open.
 */
export function arriveCarried(
  held: TcpPort | undefined,
  link: MuxStream,
  head: TcpHead,
  context: TcpArrivalContext,
): void {
  const { counters } = context;
  const connection = held?.pick();
  if (connection === undefined || !connection.ready || connection.session.draining) {
    // "Not here": the ingress passes this node over and holds the connection until a newer claim.
    counters.connections.no_agent++;
    link.reset(ErrorCode.REFUSED_STREAM);
    return;
  }
  if (connection.protection !== undefined && !connection.protection.check(undefined, head.clientAddress).ok) {
    counters.connections.forbidden++;
    link.reset(ErrorCode.CANCEL);
    return;
  }
  let agent: MuxStream | undefined;
  try {
    agent = connection.slots.tryOpen();
    const tcpHead = encodeTcpHead(head);
    agent?.sendHeaders(connection.tag === 0 ? tcpHead : encodeTunnelTag(connection.tag, tcpHead), false);
  } catch (err) {
    context.logger.debug({ err, port: head.port }, 'TCP: carried connection refused: no stream');
    agent?.reset(ErrorCode.CANCEL);
    agent = undefined;
  }
  if (agent === undefined) {
    counters.connections.refused++;
    link.reset(ErrorCode.CANCEL);
    return;
  }
  counters.connections.accepted++;
  context.started(link);
  // "Taken here": until this empty head, the ingress reads nothing from its client, so a refusal before
  // it (the port moved, its cached owner was stale) loses no byte and the ingress may ask again.
  link.sendHeaders(TCP_ACCEPTED, false);
  new StreamSplice(link, agent);
}
