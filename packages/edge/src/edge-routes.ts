import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { SessionTable } from './agents/session-table.js';
import { quoteForEcho } from './answers/echo.js';
import {
  askOf,
  EDGE_ANSWER_HEADERS,
  edgeAnswer,
  sendEdgeError,
  sendRefusal,
} from './answers/error-response.js';
import { nodeAuthRefusal } from './answers/refusals.js';
import type { Cluster } from './cluster/cluster.js';
import { TAKEOVER_PATH } from './cluster/takeover-notice.js';
import type { SharedTcpPorts } from './cluster/tcp/shared-tcp-ports.js';
import { edgeAddresses } from './edge-addresses.js';
import { EdgeErrorCode } from './errors.js';
import { hostnameOf } from './public/ingress-route.js';
import type { ResolvedEdgeOptions } from './settings/edge-options.js';

// The edge's own pages, Fastify's routes beside the tunnels (which build-edge.ts routes before Fastify sees
// them): the landing page, the takeover notice another node sends, and the 404 for any other URL.

export interface EdgeRoutesContext {
  options: ResolvedEdgeOptions;
  sessions: SessionTable;
  cluster: Cluster | undefined;
  sharedTcp: SharedTcpPorts | undefined;
  /** The base URL agents and clients use. */
  baseUrl: () => URL;
  /** A tunnel's URL in its host form, with `<name>` in place of the name (for the 404's hint). */
  ownBase: () => string;
}

/** Registers the routes; returns the 404's words for a URL, which the HTTP/2 side answers with too. */
export function registerEdgeRoutes(
  app: FastifyInstance<Server, IncomingMessage, ServerResponse, Logger>,
  context: EdgeRoutesContext,
): (url: string) => string {
  const { options, sessions, cluster, sharedTcp, baseUrl } = context;
  app.get('/', async (request, reply) => {
    reply.type('text/plain; charset=utf-8').headers(EDGE_ANSWER_HEADERS);
    const host = hostnameOf(request.headers.host) ?? options.domain;
    const addresses = edgeAddresses(baseUrl());
    return (
      'tunnel2 edge\n\n' +
      `Agents connect with:  ${addresses.agentCommand}\n` +
      '                      (tunnel2 is the command of the @tunnel2/cli package)\n' +
      `Tunnels answer at:    ${addresses.tunnelByHost}  or  ${addresses.tunnelByPath}\n` +
      // How busy an edge is, is the operator's business: shown only when asked for.
      (options.showSessionCount ? `Sessions on this node: ${sessions.size}\n` : '') +
      (host !== options.domain
        ? `\n(host ${quoteForEcho(host)} is not a tunnel under ${options.domain})\n`
        : '')
    );
  });

  if (cluster !== undefined) {
    // Another node took a name over from a connection here (see cluster/takeover-notice.ts). Without a
    // signature this path answers like every unknown path does; only on a host that is not a tunnel's.
    app.post(TAKEOVER_PATH, (request, reply) => {
      const notice = cluster.verifyNotice(request.raw);
      if (notice === undefined) return reply.callNotFound();
      reply.hijack();
      if (notice === 'forged') {
        sendRefusal(reply.raw, nodeAuthRefusal);
        return;
      }
      if (notice === 'invalid') {
        sendEdgeError(reply.raw, EdgeErrorCode.BAD_REQUEST, 'not a takeover notice for this node');
        return;
      }
      const holder = { nodeId: notice.fromNode, owner: notice.owner };
      const closed = notice.name.startsWith('tcp:')
        ? (sharedTcp?.supersede(Number(notice.name.slice(4)), notice.epoch, holder) ?? false)
        : sessions.supersede(notice.name, notice.epoch, holder);
      cluster.counters.takeovers[closed ? 'closed' : 'kept']++;
      const body = JSON.stringify({ closed });
      reply.raw.writeHead(200, {
        ...EDGE_ANSWER_HEADERS,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      });
      reply.raw.end(body);
    });
  }

  // Not a tunnel URL: the edge's own 404, in the form the client asked for (a page for a browser).
  const notTunnel = (url: string): string =>
    `not found: ${quoteForEcho(url)} is not a tunnel URL. Use ${context.ownBase()} or /session/<name>/...`;
  app.setNotFoundHandler((request, reply) => {
    const answer = edgeAnswer(
      EdgeErrorCode.UNKNOWN_SESSION,
      notTunnel(request.url),
      undefined,
      undefined,
      askOf(request.raw),
    );
    reply.hijack();
    reply.raw.writeHead(answer.status, answer.headers);
    reply.raw.end(answer.body);
  });

  return notTunnel;
}
