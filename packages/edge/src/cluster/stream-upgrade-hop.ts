import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { withoutHopByHop } from '@tunnel2/protocol';
import { sendEdgeError, sendRefusal } from '../answers/error-response.js';
import { unreachableOwner } from '../answers/refusals.js';
import { EdgeErrorCode } from '../errors.js';
import type { PublicResponse } from '../exchange/public-message.js';
import { acceptedFields, isSuccess } from '../exchange/stream-upgrade-tunnel.js';
import type { OwnerEntry } from '../public/cross-node.js';
import { hopOrigin } from '../public/forwarding-headers.js';
import type { PublicRequest } from '../public/public-request.js';
import type { Cluster } from './cluster.js';
import { type ForwardingContext, unreachable } from './forward-arrival.js';

// Taken with process.getBuiltinModule: an ESM import of node:http reads every export, and its WebSocket
// getter loads Node's own undici (bundled-undici-footprint.test.ts).
const { request: httpRequest } = process.getBuiltinModule('node:http');

/**
 * An RFC 8441 WebSocket (an HTTP/2 stream) for an agent on another node, over the HTTP hop: the owner sees
 * the same HTTP/1.1 upgrade an HTTP/1.1 client's would be relayed as (the request head cleaned and signed,
 * `cluster.hopHeaders`), and handles it as a local one. Node's HTTP client reads the owner's answer: its
 * 101 becomes the stream's `:status 200` (as `StreamUpgradeTunnel` makes a backend's), then bytes flow
 * both ways, each side paused while the other is full; any other answer is passed on as the response,
 * but a 2xx (it would read as accepted: a 502).
 */
export function forwardStreamUpgrade(
  request: PublicRequest,
  res: PublicResponse,
  owner: OwnerEntry,
  cluster: Cluster,
  context: Pick<ForwardingContext, 'inFlight' | 'logger' | 'responseTimeoutMs'>,
): void {
  const req = request.req;
  const name = request.route.name;
  const headers = cluster.hopHeaders(req, hopOrigin(request));
  headers.push('Connection', 'Upgrade', 'Upgrade', 'websocket');
  const url = new URL(owner.url);
  const secure = url.protocol === 'https:';
  context.inFlight.start();
  let settled = false;
  const settle = (ok: boolean): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    if (ok) cluster.counters.forwarded.ok++;
    context.inFlight.finish();
  };
  const outgoing: ClientRequest = (secure ? process.getBuiltinModule('node:https').request : httpRequest)({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (secure ? 443 : 80)),
    method: 'GET',
    path: req.url ?? '/',
    headers,
    agent: false,
  });
  // As the HTTP/1.1 upgrade's hop (node-hop.ts): an owner that does not accept the connection within the
  // cluster's connect timeout is unreachable. Once connected, the owner answers 504 itself at its own
  // response timeout (started later than any here): this node waits that long and a margin, as the hop's
  // headers timeout does (cluster.ts), so a slow backend is never taken for a dead node.
  let connected = false;
  let timedOut = false;
  let timer = setTimeout(
    () => outgoing.destroy(new Error('connect timeout')),
    cluster.options.connectTimeoutMs,
  );
  outgoing.once('socket', (socket: Socket) => {
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      connected = true;
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        outgoing.destroy(new Error('no answer to the upgrade'));
      }, context.responseTimeoutMs + OWNER_ANSWER_MARGIN_MS);
    });
  });
  const onClientGone = (): void => {
    outgoing.destroy();
    settle(false);
  };
  res.once('close', onClientGone);
  // `on`, not `once`: a request destroyed after its answer may still report an error, never unheard.
  outgoing.on('error', (err) => {
    if (settled || res.headersSent) return;
    res.off('close', onClientGone);
    if (timedOut) {
      sendEdgeError(
        res,
        EdgeErrorCode.RESPONSE_TIMEOUT,
        `tunnel ${name}: node ${owner.nodeId} did not answer the upgrade`,
      );
    } else if (!connected) {
      unreachable(cluster, owner, name, context, err);
      sendRefusal(res, unreachableOwner(name, owner));
    } else {
      // The connection was accepted, then lost: the owner may be restarting; not marked unreachable here.
      context.logger.warn({ err, session: name, node: owner.nodeId }, 'cluster: upgrade hop failed');
      sendRefusal(res, unreachableOwner(name, owner));
    }
    settle(false);
  });
  outgoing.once('upgrade', (answer: IncomingMessage, socket: Socket, head: Buffer) => {
    clearTimeout(timer);
    res.off('close', onClientGone);
    res.writeHead(200, acceptedFields(answer.rawHeaders));
    res.flushHeaders();
    if (head.length > 0) res.write(head);
    relay(req, res, socket, () => settle(true));
  });
  outgoing.once('response', (answer: IncomingMessage) => {
    clearTimeout(timer);
    res.off('close', onClientGone);
    const status = answer.statusCode ?? 502;
    if (isSuccess(status)) {
      // Not a switch, yet a 2xx would accept the WebSocket (as StreamUpgradeTunnel refuses it).
      answer.destroy();
      sendEdgeError(
        res,
        EdgeErrorCode.STREAM_FAILED,
        `tunnel ${name}: the backend answered the WebSocket upgrade ${status}, not 101`,
      );
      settle(false);
      return;
    }
    res.writeHead(status, withoutHopByHop(answer.rawHeaders));
    answer.on('data', (chunk: Buffer) => {
      if (!res.write(chunk)) answer.pause();
    });
    res.on('drain', () => answer.resume());
    answer.once('end', () => {
      res.end();
      settle(true);
    });
    // Cut short (the owner's connection lost mid-body): the stream is aborted, not ended as complete.
    answer.once('close', () => {
      if (!res.writableEnded) res.abortStream?.();
    });
    res.once('close', () => {
      answer.destroy();
      settle(false);
    });
  });
  outgoing.end();
}

/** How long past its response timeout an owner that accepted the hop's connection is waited for. */
const OWNER_ANSWER_MARGIN_MS = 5_000;

/** Both directions of an accepted upgrade, each paused while the other side is full; `done` once closed. */
function relay(req: PublicRequest['req'], res: PublicResponse, socket: Socket, done: () => void): void {
  socket.on('data', (chunk: Buffer) => {
    if (!res.write(chunk)) socket.pause();
  });
  res.on('drain', () => socket.resume());
  req.on('data', (chunk: Buffer) => {
    if (!socket.write(chunk)) req.pause();
  });
  socket.on('drain', () => req.resume());
  req.once('end', () => socket.end());
  socket.once('end', () => res.end());
  socket.on('error', () => {});
  socket.once('close', () => {
    // The owner's connection went before its end was passed on: the stream is cut short, not ended.
    if (!res.writableEnded) res.abortStream?.();
    done();
  });
  res.once('close', () => socket.destroy());
}
