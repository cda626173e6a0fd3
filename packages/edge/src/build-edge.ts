import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ErrorCode, WindowBudget } from '@tunnel2/protocol';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import { type Logger, pino } from 'pino';
import { ClientOriginResolver } from './access/client-address.js';
import { createAgentEndpoint } from './agents/agent-endpoint.js';
import { SessionTable } from './agents/session-table.js';
import { quoteForEcho } from './answers/echo.js';
import { answerClientError, rejectUpgrade, sendEdgeError, sendRefusal } from './answers/error-response.js';
import { edgeStopping, nodeAuthRefusal } from './answers/refusals.js';
import { Cluster } from './cluster/cluster.js';
import { createCrossNodeForwarder } from './cluster/cross-node-forwarder.js';
import { NodeLinkServer } from './cluster/link/node-link-server.js';
import { LINK_PATH } from './cluster/node-auth.js';
import { RegistryTimings, replicaSetsOf, timedRegistry } from './cluster/timed-registry.js';
import { type EdgeAddresses, edgeAddresses } from './edge-addresses.js';
import { registerEdgeRoutes } from './edge-routes.js';
import { edgeTcpPorts } from './edge-tcp.js';
import { EdgeErrorCode } from './errors.js';
import { InFlight } from './exchange/in-flight.js';
import { createHttp1Server, headProblem, isWebSocketUpgrade } from './listeners/http1-server.js';
import { compatibilityPair } from './listeners/http2-compat.js';
import { EdgeHttp2Request, EdgeHttp2Response } from './listeners/http2-messages.js';
import { DEFAULT_HTTP2_LIMITS, PublicHttp2Server } from './listeners/http2-server.js';
import { type Http2Problem, http2RequestProblem, isHttp2WebSocket } from './listeners/http2-websocket.js';
import { PrefaceSniffer } from './listeners/preface-sniff.js';
import { type DropReason, PublicConnections } from './listeners/public-connections.js';
import { type EdgeTls, PublicPort } from './listeners/public-port.js';
import { NO_ROUTE_SCHEMAS } from './no-route-schemas.js';
import { answerFrameworkError, ignoreBody } from './public/framework-answers.js';
import { resolveIngressRoute } from './public/ingress-route.js';
import { StartupGrace } from './public/startup-grace.js';
import { handleTunnelRequest, handleTunnelUpgrade, handleTunnelWebSocket } from './public/tunnel-ingress.js';
import { type EdgeOptions, type ResolvedEdgeOptions, resolveEdgeOptions } from './settings/edge-options.js';
import type { TcpPortTable } from './tcp/tcp-tunnels.js';

export interface Edge {
  readonly app: FastifyInstance<Server, IncomingMessage, ServerResponse, Logger>;
  readonly sessions: SessionTable;
  readonly options: ResolvedEdgeOptions;
  /** Cluster mode's node (owner lookups, the node-to-node hop, its counters); undefined on one node. */
  readonly cluster: Cluster | undefined;
  /** The links other nodes opened to this one (how many, their streams and queued bytes); undefined without links. */
  readonly linkServer: Pick<NodeLinkServer, 'size' | 'streams' | 'bufferedBytes'> | undefined;
  /** Every registry operation's duration and outcome (the metrics subscribe). */
  readonly registryTimings: RegistryTimings;
  /** Starts listening; resolves with the bound port. */
  listen(): Promise<{ port: number; url: string }>;
  /** The base URL agents and clients use (valid after listen). */
  readonly url: string;
  /** Public URLs of a session name. */
  urlsFor(name: string): { url: string; urls: string[] };
  /** Where agents connect and the forms of a tunnel's URL, as the banner and the landing page say them. */
  addresses(): EdgeAddresses;
  /** Requests currently being carried through tunnels. */
  readonly inFlight: number;
  /** The public TCP ports and their counters; undefined unless `tcpPorts` is set. */
  readonly tcp: TcpPortTable | undefined;
  /** The window growth budget agent sessions and node links draw on (`edgeWindowBudget`); `used`: their total. */
  readonly windowBudget: WindowBudget;
  /** The startup grace (`startupGraceMs`): whether it is open, and the requests waiting in it. */
  readonly startup: StartupGrace;
  /** Public connections closed at accept, by reason (the open-file cap, `maxConnectionsPerAddress`). */
  readonly publicConnections: { readonly dropped: Readonly<Record<DropReason, number>> };
  /**
   * The server that accepts public connections: the HTTP/1.1 server itself on a plain port without HTTP/2,
   * else the TLS or preface-sniffing listener in front of it (its 'error' on a failed accept is heard).
   */
  readonly publicServer: NetServer;
  /** The public side's HTTP/2 connections as they start ('connection', with the socket). */
  readonly http2Connections: Pick<NodeJS.EventEmitter, 'on' | 'off'>;
  /** TLS on the public port (`tlsCert`/`tlsKey`); undefined when the port is plain HTTP. */
  readonly tls: EdgeTls | undefined;
  /**
   * Serves a connection that speaks HTTP/2 from its first byte: a TLS socket whose ALPN chose `h2` (the TLS
   * listener hands it here), with any bytes already read put back on it. The plain port's h2c needs nothing:
   * its preface is sniffed.
   */
  serveHttp2(socket: Duplex): void;
  /** Graceful stop: refuse new work, GOAWAY to agents, let in-flight requests finish within `graceMs`. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Builds the edge without listening. Tunnel traffic is routed before Fastify sees it (no body parsing,
 * no per-request hooks on the hot path); everything else — the landing page, errors — is a Fastify route.
 */
export function buildEdge(edgeOptions: EdgeOptions = {}): Edge {
  const options = resolveEdgeOptions(edgeOptions);
  const logger: Logger = edgeOptions.logger ?? pino({ level: process.env.TUNNEL2_LOG_LEVEL ?? 'info' });
  const registryTimings = new RegistryTimings();
  // The edge's own calls are timed; options.registry stays the unwrapped one (closed as given).
  const registry = timedRegistry(options.registry, registryTimings);
  // One for the whole edge: the window growth of every agent session and node link draws on it.
  const windowBudget = new WindowBudget(options.edgeWindowBudget);
  const cluster =
    options.cluster === undefined
      ? undefined
      : new Cluster({
          registry,
          nodeId: options.nodeId,
          options: options.cluster,
          logger,
          responseTimeoutMs: options.responseTimeoutMs,
          protocol: options.protocol,
          maxMessageSize: options.maxMessageSize,
          windowBudget,
          replicaSets: replicaSetsOf(registry),
        });
  const sessions = new SessionTable({
    registry,
    nodeId: options.nodeId,
    leaseTtlMs: options.leaseTtlMs,
    reconnectGraceMs: options.reconnectGraceMs,
    maxArrivalWaiters: options.maxWaitingPerSession,
    logger,
    onTakeover:
      cluster === undefined ? undefined : (replaced, claimed) => cluster.tellTakeover(replaced, claimed),
    replicaSets: cluster === undefined ? undefined : replicaSetsOf(registry),
  });
  const inFlight = new InFlight();
  const clients = new ClientOriginResolver(options.trustedProxies);
  let draining = false;
  /**
   * Set once the drain's waits are over and what carries requests starts to close. A request still read
   * then gets the edge's own 503 (Retry-After, Connection: close), never an answer from sessions or links
   * already closed, nor a reset: a client cannot tell a reset after its request from a lost answer.
   */
  let stopping = false;
  const connections = new PublicConnections({
    maxPerAddress: options.maxConnectionsPerAddress,
    exempt: (address) => clients.trusts(address),
    logger,
  });
  let boundPort = options.port;
  const { tcp, shared: sharedTcp } = edgeTcpPorts(options, { registry, cluster, inFlight, logger });
  const linkServer =
    cluster?.links === undefined
      ? undefined
      : new NodeLinkServer({
          nodeId: options.nodeId,
          auth: cluster.auth,
          sessions,
          inFlight,
          maxRequestBodyBytes: options.maxRequestBodyBytes,
          maxMessageSize: options.maxMessageSize,
          protocol: options.protocol,
          windowBudget,
          logger,
          onForged: () => cluster.counters.forged++,
          isListening: () => publicPort.listening,
          helloTimeoutMs: options.helloTimeoutMs,
          tcp: sharedTcp,
        });
  const ingress = {
    sessions,
    responseTimeoutMs: options.responseTimeoutMs,
    logger,
    inFlight,
    maxRequestBodyBytes: options.maxRequestBodyBytes,
    reconnectWaitMs: options.reconnectWaitMs,
    clients,
    crossNode:
      cluster === undefined
        ? undefined
        : createCrossNodeForwarder(cluster, {
            inFlight,
            logger,
            responseTimeoutMs: options.responseTimeoutMs,
            maxRequestBodyBytes: options.maxRequestBodyBytes,
          }),
    startup: new StartupGrace(options.startupGraceMs),
    isDraining: () => draining,
  };
  const baseUrl = (): URL =>
    new URL(options.publicUrl ?? `${publicPort.scheme}://${options.domain}:${boundPort}`);
  const urlsFor = (name: string): { url: string; urls: string[] } => {
    const base = baseUrl();
    const hostUrl = new URL(base);
    hostUrl.hostname = `${name}.${base.hostname}`;
    const pathUrl = new URL(`session/${name}/`, base.href.endsWith('/') ? base : `${base.href}/`);
    return { url: hostUrl.href, urls: [hostUrl.href, pathUrl.href] };
  };

  // HTTP/2 on the public side: its requests join HTTP/1.1's below ('request', so request ids and metrics
  // see them too) once the connection is known to speak it (the preface on the plain port, or ALPN).
  const http2 = new PublicHttp2Server({
    limits: { ...DEFAULT_HTTP2_LIMITS, maxHeaderListSize: options.maxHeaderBytes },
    idleTimeoutMs: options.keepAliveTimeoutMs,
    logger,
    onRequest: (req, res, expectsContinue) =>
      app.server.emit(expectsContinue ? 'checkContinue' : 'request', req, res),
  });

  // A plain connection's first bytes decide its protocol (the HTTP/2 preface: h2c with prior knowledge); the
  // public port says, per connection, where each protocol is taken (choosePlain below).
  type PlainTake = (protocol: 'h2' | 'http/1.1', socket: Duplex) => void;
  const plainTakes = new WeakMap<Socket, PlainTake>();
  const sniffer = new PrefaceSniffer(options.headersTimeoutMs, {
    http1(socket: Socket, read: Buffer): void {
      plainTakes.get(socket)?.('http/1.1', socket);
      // What was read goes to the HTTP parser first; the rest it reads from the socket itself.
      socket.emit('data', read);
      socket.resume();
    },
    http2: (socket: Socket): void => plainTakes.get(socket)?.('h2', socket),
  });
  const serverFactory = (fastifyHandler: (req: IncomingMessage, res: ServerResponse) => void): Server => {
    const onRequest = (
      req: IncomingMessage | EdgeHttp2Request,
      res: ServerResponse | EdgeHttp2Response,
      expectsContinue: boolean,
    ): void => {
      // Draining: no connection is kept for a next request, which the teardown would no longer carry.
      if (draining) res.shouldKeepAlive = false;
      if (stopping) {
        sendRefusal(res, edgeStopping);
        return;
      }
      const overHttp2 = req instanceof EdgeHttp2Request;
      // HTTP/1.1's CONNECT never gets here (its own event, below); over HTTP/2 it is a request like any, and
      // an RFC 8441 WebSocket is made HTTP/1.1's upgrade request here.
      const problem: Http2Problem | undefined = overHttp2 ? http2RequestProblem(req) : headProblem(req);
      if (problem !== undefined) {
        sendEdgeError(
          res,
          problem.code,
          problem.message,
          undefined,
          problem.headers ?? { connection: 'close' },
        );
        return;
      }
      const webSocket = overHttp2 && isHttp2WebSocket(req);
      const route = resolveIngressRoute(req.headers.host, req.url ?? '/', options.domain);
      if (route !== undefined) {
        // Another node's forwarded request: believed for its client only when its signature verifies.
        const via = cluster?.verify(req);
        if (via === 'forged') {
          sendRefusal(res, nodeAuthRefusal);
          return;
        }
        // With Expect: 100-continue the backend decides: its 100 is relayed, or its early final answer.
        if (webSocket) handleTunnelWebSocket(req, res, route, ingress, via);
        else handleTunnelRequest(req, res, route, ingress, via);
        return;
      }
      if (expectsContinue) res.writeContinue();
      // The agents' endpoint and the node links are HTTP/1.1 upgrades: over HTTP/2, no tunnel is the 404.
      if (webSocket) sendEdgeError(res, EdgeErrorCode.UNKNOWN_SESSION, notTunnel(req.url ?? '/'));
      // The edge's own pages over HTTP/2: Fastify's router, over Node's compatibility objects (rare path).
      else if (req instanceof EdgeHttp2Request) {
        if (res instanceof EdgeHttp2Response) fastifyHandler(...compatibilityPair(req, res));
      } else if (!(res instanceof EdgeHttp2Response)) fastifyHandler(req, res);
    };
    // HTTP/2 requests reach this server's 'request' and 'checkContinue' too (PublicHttp2Server's onRequest).
    return createHttp1Server({
      headersTimeoutMs: options.headersTimeoutMs,
      requestTimeoutMs: options.requestTimeoutMs,
      keepAliveTimeoutMs: options.keepAliveTimeoutMs,
      idleTimeoutMs: options.idleTimeoutMs,
      maxHeaderBytes: options.maxHeaderBytes,
      connections,
      onRequest,
    });
  };

  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: true }),
    serverFactory,
    // Tunnelled bodies never pass through Fastify; its own routes are small.
    bodyLimit: 64 * 1024,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
    schemaController: NO_ROUTE_SCHEMAS,
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', ignoreBody);

  // How connections arrive: the HTTP/1.1 server listening, or a TLS port feeding it (listeners/README.md).
  // Certificates are read here: a missing file or a key that is not its certificate's stops the start.
  const publicPort = new PublicPort({
    http1: app.server,
    connections,
    tls: options.tls,
    domain: options.domain,
    publicHttpsPort: () => {
      const base = baseUrl();
      return base.protocol === 'https:' ? Number(base.port || 443) : undefined;
    },
    headersTimeoutMs: options.headersTimeoutMs,
    maxHeaderBytes: options.maxHeaderBytes,
    reusePort: options.reusePort,
    logger,
    // HTTP/2: after ALPN h2 on the TLS port; on a plain port, a connection whose first bytes are the
    // HTTP/2 preface (h2c with prior knowledge), the bytes read to tell being handed to HTTP/1.1 otherwise.
    http2: (socket) => http2.handle(socket),
    choosePlain: (socket, take) => {
      plainTakes.set(socket, take);
      sniffer.sniff(socket);
    },
  });

  const agentEndpoint = createAgentEndpoint({
    options,
    sessions,
    logger,
    windowBudget,
    urlsFor,
    isDraining: () => draining,
    clients,
    tcp,
    tcpUrlFor: (port) => `tcp://${baseUrl().hostname}:${port}`,
  });

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    connections.upgraded(req.socket);
    if (stopping) {
      rejectUpgrade(socket, edgeStopping);
      return;
    }
    const problem = headProblem(req);
    if (problem !== undefined) {
      rejectUpgrade(socket, problem);
      return;
    }
    const route = resolveIngressRoute(req.headers.host, req.url ?? '/', options.domain);
    if (!isWebSocketUpgrade(req)) {
      // Reached only on Node versions without shouldUpgradeCallback.
      rejectUpgrade(socket, {
        code: EdgeErrorCode.UPGRADE_UNSUPPORTED,
        message: `only WebSocket upgrades are tunnelled, not ${quoteForEcho(String(req.headers.upgrade))}`,
      });
      return;
    }
    if (route !== undefined) {
      const via = cluster?.verify(req);
      if (via === 'forged') {
        rejectUpgrade(socket, nodeAuthRefusal);
        return;
      }
      handleTunnelUpgrade(req, socket, head, route, ingress, via);
      return;
    }
    const path = (req.url ?? '').split('?')[0];
    if (path === options.agentPath) {
      agentEndpoint.handleUpgrade(req, socket, head);
      return;
    }
    if (path === LINK_PATH && linkServer !== undefined) {
      linkServer.handleUpgrade(req, socket, head);
      return;
    }
    rejectUpgrade(socket, {
      code: EdgeErrorCode.UNKNOWN_SESSION,
      message: `not found: ${quoteForEcho(req.url ?? '/')} is neither a tunnel URL nor the agent endpoint`,
    });
  });

  // The edge's own pages: the landing page, the takeover notice between nodes, the 404 for other URLs.
  const notTunnel = registerEdgeRoutes(app, {
    options,
    sessions,
    cluster,
    sharedTcp,
    baseUrl,
    ownBase: () => `${publicPort.scheme}://<name>.${options.domain}:${boundPort}/`,
  });

  const edge: Edge = {
    app,
    sessions,
    options,
    cluster,
    linkServer,
    registryTimings,
    get url() {
      return `${publicPort.scheme}://${options.host.includes(':') ? `[${options.host}]` : options.host}:${boundPort}`;
    },
    get inFlight() {
      return inFlight.count;
    },
    tcp,
    windowBudget,
    tls: publicPort.tls,
    startup: ingress.startup,
    publicConnections: connections,
    get publicServer() {
      return publicPort.server;
    },
    http2Connections: http2.connections,
    urlsFor,
    addresses: () => edgeAddresses(baseUrl()),
    // The listener that accepted the connection counted it against the caps.
    serveHttp2: (socket) => http2.handle(socket),
    async listen() {
      boundPort = await publicPort.listen(
        options.port,
        options.host,
        () => app.listen({ port: options.port, host: options.host, ...publicPort.listenFlags }),
        async () => {
          await app.ready();
        },
      );
      // From the moment agents can reach this process: those of the one it replaced reconnect from now.
      ingress.startup.start();
      await tcp?.start();
      await cluster?.start(edge.url);
      // Counted once what the edge itself opens at start (TCP ports, the registry) is open.
      publicPort.capConnections();
      return { port: boundPort, url: edge.url };
    },
    async close(graceMs = 10_000) {
      const deadline = Date.now() + graceMs;
      draining = true;
      http2.drain();
      linkServer?.drain();
      for (const connection of [...sessions.connections()]) {
        if (cluster === undefined) connection.drain('edge shutting down');
        else connection.handOver('edge draining: reconnect to another node');
      }
      await inFlight.idle(graceMs);
      // No new public connection from here: one taken later could no longer be carried (sessions, links and
      // the hop close below, and a link opened after them would keep the process alive), whereas a refused
      // one a load balancer sends elsewhere. Requests already taken are served within what is left of the
      // grace. Fastify's own close later finds the server stopped, which it allows. Not http.Server's
      // close: since Node 19 it also closes every idle keep-alive connection at once, and a client that
      // sent a request on one just then sees a reset (11-24 per restart under keep-alive load). Every
      // answer since the drain began closes its connection (onRequest), and an idle one closes at its
      // keep-alive timeout (plus Node's second of margin), which clients were told of: they are waited for,
      // within the grace. One that never sent a request would wait for headersTimeoutMs: not that long.
      publicPort.stopAccepting();
      const left = Math.max(0, deadline - Date.now());
      // keepAliveTimeoutBuffer is recent (Node 24.6, 22.19); before it the margin was the same second.
      const margin = (app.server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer ?? 1_000;
      const keptAlive = app.server.keepAliveTimeout + margin;
      await Promise.all([
        inFlight.idle(left),
        connections.closed(Math.min(left, keptAlive)),
        http2.closed(left),
      ]);
      // Connections still idle go now. Requests still running are answered by the sessions' close; a
      // request read from here gets a 503 (onRequest).
      stopping = true;
      app.server.closeIdleConnections();
      sniffer.closeIdle();
      for (const connection of [...sessions.connections()])
        connection.close(ErrorCode.GOING_AWAY, 'edge stopped');
      sessions.close();
      tcp?.close();
      linkServer?.close();
      await cluster?.close();
      agentEndpoint.close();
      // The answers just written (by the sessions' close, or a 503) are corked until the next tick: they
      // leave before the connections are cut.
      await new Promise((resolve) => setImmediate(resolve));
      app.server.closeAllConnections();
      publicPort.destroyAll();
      http2.destroy();
      await app.close();
      publicPort.closeFed();
      connections.close();
      if (options.ownsRegistry) await options.registry.close();
    },
  };
  return edge;
}
