import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCode, type StreamResetError } from '@tunnel2/protocol';
import { sendRefusal } from '../../answers/error-response.js';
import {
  agentDisconnected,
  bodyTooLarge,
  busy,
  http2OverHop,
  linkShareFull,
  nodeStopping,
  offline,
  type Refusal,
  unreachableOwner,
} from '../../answers/refusals.js';
import type { PublicResponse } from '../../exchange/public-message.js';
import { isIdempotent, requestHasBody } from '../../exchange/raw-http.js';
import { TunnelExchange } from '../../exchange/tunnel-exchange.js';
import { encodeHead } from '../../public/admission.js';
import type { OwnerEntry } from '../../public/cross-node.js';
import { LINK_CLIENT_HEADER, LINK_SESSION_HEADER } from '../../public/cross-node.js';
import { forwardedHeaders } from '../../public/forwarding-headers.js';
import type { PublicRequest } from '../../public/public-request.js';
import type { Cluster } from '../cluster.js';
import { type ForwardingContext, forwardRequest, unreachable } from '../forward-arrival.js';
import type { NodeLinks } from './node-link.js';
import { AGENT_LOST } from './stream-splice.js';

type Ingress = ForwardingContext;

/**
 * Carries one public request to the node holding its session over the link to that node, through the
 * same TunnelExchange as a request for an agent connected here: the ingress sees the real client, so it
 * states the forwarded headers, and checks the answer's head, interim heads, trailers, body limits and
 * the response timeout itself. The holder hears which session and which client address (for its
 * allow-list) in two fields at the end of the head, believed because the link is authenticated.
 * A request the holder did not process (REFUSED_STREAM: the session is not live there, or the node
 * drains) is sent elsewhere through `lost` when it has no body, as the HTTP hop does with "not here";
 * one the holder may have passed to its agent (the link died, or the agent left: AGENT_LOST) only when
 * its method is also idempotent. Otherwise it is answered as that hop, or one node, would.
 */
export function forwardOverLink(
  request: PublicRequest,
  res: PublicResponse,
  owner: OwnerEntry,
  cluster: Cluster,
  links: NodeLinks,
  options: Ingress,
  lost?: (owner: OwnerEntry) => void,
): void {
  const { req, route } = request;
  const name = route.name;
  const declared = request.declaredLength;
  if (declared > options.maxRequestBodyBytes) {
    sendRefusal(res, bodyTooLarge(declared, options.maxRequestBodyBytes));
    return;
  }
  const headers = forwardedHeaders(request);
  const client = request.clientAddress;
  headers.push(LINK_SESSION_HEADER, name, LINK_CLIENT_HEADER, client);
  const hasBody = requestHasBody(req);
  // Once the head is on the link, the holder may have given it to its agent: only a method that may run
  // twice is sent elsewhere then (RFC 9110 §9.2.2).
  const again = (processed: boolean): boolean =>
    lost !== undefined && !hasBody && (!processed || isIdempotent(req.method));
  const inFlight = options.inFlight;
  inFlight.start();
  const refuse = (refusal: Refusal): void => sendRefusal(res, refusal);
  const linkFailed = (err: unknown, processed: boolean): void => {
    unreachable(cluster, owner, name, options, err);
    if (again(processed)) lost?.(owner);
    else refuse(unreachableOwner(name, owner));
  };
  // The owner's node id left its address (another node answers there, e.g. the same node restarted with a
  // new id): the link never opened, so nothing of the request was sent nor read, body included. It waits
  // for the registry to name where the session is now, as an arrival for a reconnecting agent does.
  const ownerGone = (): void => {
    cluster.gone(owner);
    if (lost !== undefined) lost(owner);
    else refuse(unreachableOwner(name, owner));
  };
  const tenant = { session: name, account: owner.account, client };
  links.open(owner, tenant, (opening) => {
    try {
      // Gone, or answered meanwhile (a gRPC call whose deadline passed while the link opened).
      if (res.destroyed || res.writableEnded) {
        if ('stream' in opening) opening.stream.reset(ErrorCode.CANCEL);
        return;
      }
      if ('failed' in opening) {
        if (opening.failed === 'refused') {
          // This peer refuses links: the HTTP hop, which carries Node's HTTP/1.1 messages only.
          if (req.httpVersionMajor === 1 && res.abortStream === undefined)
            forwardRequest(
              request,
              req as IncomingMessage,
              res as ServerResponse,
              owner,
              cluster,
              options,
              lost,
            );
          else refuse(http2OverHop(name, owner));
        } else if (opening.failed === 'full') refuse(busy(name));
        else if (opening.failed === 'share') refuse(linkShareFull(name));
        else if (opening.failed === 'stopping') refuse(nodeStopping(name));
        else if (opening.failed === 'misdirected') ownerGone();
        else linkFailed(opening.err, false);
        return;
      }
      const { stream } = opening;
      // A gRPC call: the exchange's timer bounds it from here with the time left since it arrived at this
      // node, and the serving node's agent is told that time in its grpc-timeout.
      const deadline = request.deadline;
      const callTimeoutMs = deadline?.hold();
      if (callTimeoutMs === 0) {
        stream.reset(ErrorCode.CANCEL);
        deadline?.release(); // the arrival answers DEADLINE_EXCEEDED
        return;
      }
      deadline?.passOn(headers);
      const encoded = encodeHead(
        { method: request.method, target: route.target, headers },
        opening.maxFrameSize,
      );
      if ('refusal' in encoded) {
        stream.reset(ErrorCode.CANCEL);
        refuse(encoded.refusal);
        return;
      }
      inFlight.start();
      let handedBack = false;
      res.setHeader('x-tunnel2-node', owner.nodeId);
      const exchange = new TunnelExchange(req, res, stream, {
        name,
        responseTimeoutMs: options.responseTimeoutMs,
        callTimeoutMs,
        callGivenMs: deadline?.givenMs,
        maxRequestBodyBytes: options.maxRequestBodyBytes,
        onUnanswered: (error: StreamResetError) => {
          const code = error.protocolCode;
          if (code !== ErrorCode.REFUSED_STREAM && code !== ErrorCode.SESSION_CLOSED && code !== AGENT_LOST)
            return false;
          handedBack = true;
          res.removeHeader('x-tunnel2-node');
          // Sent elsewhere or answered here: until another exchange takes it, the call's deadline is timed
          // by its arrival again.
          deadline?.release();
          if (code === ErrorCode.SESSION_CLOSED) {
            // The link died under the request: the holder may have passed it on before.
            linkFailed(error, true);
            return true;
          }
          cluster.notHere(name, owner);
          // REFUSED_STREAM: not processed there. AGENT_LOST: its agent left after it got the request.
          const processed = code === AGENT_LOST;
          if (again(processed)) lost?.(owner);
          else if (processed) refuse(agentDisconnected(name));
          // A replica's refusal (its agent going away before the request ran) is "busy" as on one edge:
          // the name is still served, by its other replicas, and the client may send it again.
          else refuse(owner.replica === true ? busy(name) : offline(name));
          return true;
        },
        onFinish: () => {
          if (!handedBack) cluster.counters.forwarded[res.destroyed ? 'aborted' : 'ok']++;
          inFlight.finish();
        },
      });
      stream.sendHeaders(encoded.payload, !hasBody);
      if (hasBody) exchange.pumpRequestBody();
      else req.resume();
    } finally {
      // After `lost` (or the exchange) took the request on: the in-flight count never dips to zero between.
      inFlight.finish();
    }
  });
}
