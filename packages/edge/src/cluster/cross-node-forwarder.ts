import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendRefusal } from '../answers/error-response.js';
import { http2OverHop } from '../answers/refusals.js';
import type { PublicMessage, PublicResponse } from '../exchange/public-message.js';
import type { CrossNodeForwarder } from '../public/cross-node.js';
import type { Cluster } from './cluster.js';
import { type ForwardingContext, forwardRequest, forwardUpgrade } from './forward-arrival.js';
import { forwardOverLink } from './link/link-arrival.js';
import { forwardStreamUpgrade } from './stream-upgrade-hop.js';

/**
 * The cluster behind the ingress's CrossNodeForwarder (public/cross-node.ts): owner lookups are the
 * cluster's, and the one choice of path for a request is made here, over the node link when one reaches
 * the owner (and the link does not send that owner through the hop), else over the HTTP hop. An upgrade
 * always takes the hop (a raw pipe once it connects; an RFC 8441 one through Node's HTTP client).
 */
export function createCrossNodeForwarder(cluster: Cluster, context: ForwardingContext): CrossNodeForwarder {
  return {
    nodeId: cluster.nodeId,
    owner: (name) => cluster.owner(name),
    find: (name, passed) => cluster.find(name, passed),
    pickHolder: (name, passed) => cluster.replicas.pick(name, true, passed) ?? 'here',
    track: (name, nodeId) => cluster.replicas.track(name, nodeId),
    forwardRequest(request, res, owner, lost) {
      const links = cluster.links;
      if (links !== undefined && !links.viaHop(owner.url))
        forwardOverLink(request, res, owner, cluster, links, context, lost);
      else if (isHttp1(request.req) && isHttp1Response(res))
        forwardRequest(request, request.req, res, owner, cluster, context, lost);
      else sendRefusal(res, http2OverHop(request.route.name, owner));
    },
    forwardUpgrade(request, socket, head, owner) {
      if (isHttp1(request.req)) forwardUpgrade(request, request.req, socket, head, owner, cluster, context);
    },
    forwardStreamUpgrade: (request, res, owner) =>
      forwardStreamUpgrade(request, res, owner, cluster, context),
  };
}

// The HTTP hop pipes Node's HTTP/1.1 messages; an HTTP/2 stream's request and response are the HTTP/2
// ingress's own (listeners/http2-messages.ts), which abort by their stream.
function isHttp1(req: PublicMessage): req is IncomingMessage {
  return req.httpVersionMajor === 1;
}

function isHttp1Response(res: PublicResponse): res is ServerResponse {
  return res.abortStream === undefined;
}
