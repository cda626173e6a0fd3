import type { CrossNodeForwarder } from '../public/cross-node.js';
import type { Cluster } from './cluster.js';
import { type ForwardingContext, forwardRequest, forwardUpgrade } from './forward-arrival.js';
import { forwardOverLink } from './link/link-arrival.js';

/**
 * The cluster behind the ingress's CrossNodeForwarder (public/cross-node.ts): owner lookups are the
 * cluster's, and the one choice of path for a request is made here, over the node link when one reaches
 * the owner (and the link does not send that owner through the hop), else over the HTTP hop. An upgrade
 * always takes the hop (a raw pipe once it connects).
 */
export function createCrossNodeForwarder(cluster: Cluster, context: ForwardingContext): CrossNodeForwarder {
  return {
    nodeId: cluster.nodeId,
    owner: (name) => cluster.owner(name),
    find: (name) => cluster.find(name),
    forwardRequest(request, res, owner, lost) {
      const links = cluster.links;
      if (links !== undefined && !links.viaHop(owner.url))
        forwardOverLink(request, res, owner, cluster, links, context, lost);
      else forwardRequest(request, res, owner, cluster, context, lost);
    },
    forwardUpgrade(request, socket, head, owner) {
      forwardUpgrade(request, socket, head, owner, cluster, context);
    },
  };
}
