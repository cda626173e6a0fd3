import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  ErrorCode,
  encodeRequestHead,
  type MuxStream,
  ProtocolError,
  ProtocolErrorCode,
  type RawHeaders,
  withoutHopByHop,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { AgentConnection } from './agent-connection.js';
import { type ClientOrigin, type ClientOriginResolver, normalizeAddress } from './client-address.js';
import type { Cluster, HopOrigin, OwnerFinding } from './cluster/cluster.js';
import type { HopOutcome } from './cluster/node-hop.js';
import type { OwnerEntry } from './cluster/owner-cache.js';
import { quoteForEcho } from './echo.js';
import { rejectUpgrade, sendEdgeError } from './error-response.js';
import { EdgeErrorCode } from './errors.js';
import type { InFlight } from './in-flight.js';
import { type IngressRoute, isValidSessionName } from './ingress-route.js';
import type { SessionTable } from './session-table.js';
import type { SlotWaiter } from './stream-slots.js';
import { TunnelExchange } from './tunnel-exchange.js';
import { UpgradeTunnel } from './upgrade-tunnel.js';

export interface TunnelIngressOptions {
  sessions: SessionTable;
  responseTimeoutMs: number;
  logger: Logger;
  /** Counts requests in flight (for drain and metrics). */
  inFlight: InFlight;
  maxRequestBodyBytes: number;
  /** How long a request for a reconnecting agent's name waits for it (0: answer 502 at once). */
  reconnectWaitMs: number;
  /** Decides who a request comes from (the peer, or what a trusted proxy in front says). */
  clients: ClientOriginResolver;
  /** Cluster mode: finds the node holding a name and carries requests there. Undefined on one node. */
  cluster?: Cluster | undefined;
}

interface Refusal {
  code: EdgeErrorCode;
  message: string;
  retryAfterS?: number;
  headers?: Record<string, string>;
}

/** One public request or upgrade, as the routing below needs it: it is refused, or started on a stream. */
interface Arrival {
  readonly req: IncomingMessage;
  readonly upgrade: boolean;
  refuse(refusal: Refusal): void;
  start(stream: MuxStream, payload: Buffer): void;
  /** True once the client has gone away (a waiting request then leaves its queue). */
  readonly gone: boolean;
  /** Calls `onGone` if the client disconnects; returns the unsubscribe. */
  watch(onGone: () => void): () => void;
  /** The client as another node vouched for it (a forwarded request); such a request is never forwarded. */
  readonly via: ClientOrigin | undefined;
  /**
   * Carries the arrival to the node holding its session (cluster mode). With `lost`, a request that can
   * be sent again (no body, nothing written to the client) whose owner cannot be reached or no longer
   * holds the session is handed to `lost` instead of being refused.
   */
  forward(owner: OwnerEntry, cluster: Cluster, lost?: (owner: OwnerEntry) => void): void;
}

/** How often a request waiting for its agent in cluster mode asks the registry where the agent is now. */
const CLUSTER_POLL_MS = 200;
/** Bound on the rounds of one such wait, whatever the clock does (reconnectWaitMs is at most 60 s). */
const CLUSTER_MAX_ROUNDS = 400;

const unreachableOwner = (name: string, owner: OwnerEntry): Refusal => ({
  code: EdgeErrorCode.NODE_UNREACHABLE,
  message: `tunnel ${name}: the edge node holding it (${quoteForEcho(owner.nodeId, 64)}) cannot be reached`,
  retryAfterS: 5,
});

const registryUnavailable = (name: string): Refusal => ({
  code: EdgeErrorCode.REGISTRY_UNAVAILABLE,
  message: `tunnel ${name} is not on this node and the session registry is unavailable to find it`,
  retryAfterS: 5,
});

const busy = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_BUSY,
  message: `tunnel ${name} has too many requests in flight`,
  retryAfterS: 1,
});

const restarting = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_BUSY,
  message: `tunnel ${name} is restarting: retry shortly`,
  retryAfterS: 1,
});

const offline = (name: string): Refusal => ({
  code: EdgeErrorCode.TUNNEL_OFFLINE,
  message: `tunnel ${name} is offline: its agent is not connected`,
  retryAfterS: 5,
});

/**
 * Routes an arrival to its session: checks what the agent asked the edge to enforce and the session's
 * limits, then opens a stream — at once, or after a bounded wait for a free slot, or (when the agent is
 * reconnecting) after a bounded wait for it to come back.
 */
function dispatch(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  waited: boolean,
): void {
  const connection = options.sessions.get(route.name);
  // In a cluster, a session draining here (its agent told to go elsewhere) is looked for on other nodes;
  // a request another node forwarded is never forwarded again and gets "offline" so that node looks.
  const leaving = connection !== undefined && options.cluster !== undefined && connection.session.draining;
  if (leaving && arrival.via !== undefined) {
    arrival.refuse(offline(route.name));
    return;
  }
  if (connection === undefined || !connection.ready || leaving) {
    if (waited) arrival.refuse(offline(route.name));
    else void awaitAgent(arrival, route, options);
    return;
  }
  const prepared = prepare(arrival, route, connection, options);
  if ('refusal' in prepared) {
    arrival.refuse(prepared.refusal);
    return;
  }
  const { payload } = prepared;
  let stream: MuxStream | undefined;
  try {
    stream = connection.slots.tryOpen();
  } catch {
    arrival.refuse(restarting(route.name));
    return;
  }
  if (stream !== undefined) {
    arrival.start(stream, payload);
    return;
  }
  let unwatch = (): void => {};
  const waiter: SlotWaiter = {
    granted(granted) {
      unwatch();
      if (arrival.gone) granted.reset(ErrorCode.CANCEL);
      else arrival.start(granted, payload);
    },
    refused() {
      unwatch();
      arrival.refuse(busy(route.name));
    },
  };
  if (!connection.slots.wait(waiter)) {
    arrival.refuse(busy(route.name));
    return;
  }
  unwatch = arrival.watch(() => connection.slots.cancel(waiter));
}

/** The checks made before a stream is spent on a request; the encoded request head when they pass. */
function prepare(
  arrival: Arrival,
  route: IngressRoute,
  connection: AgentConnection,
  options: TunnelIngressOptions,
): { payload: Buffer } | { refusal: Refusal } {
  const req = arrival.req;
  // Only read when the operator trusts a proxy in front; otherwise nothing the client wrote is looked at.
  const origin = arrival.via ?? (options.clients.trustsAnyone ? options.clients.resolve(req) : undefined);
  const verdict = connection.protection?.check(
    req,
    origin?.address ?? normalizeAddress(req.socket.remoteAddress ?? ''),
  );
  if (verdict !== undefined && !verdict.ok) {
    return {
      refusal: {
        code: verdict.status === 401 ? EdgeErrorCode.PUBLIC_AUTH_REQUIRED : EdgeErrorCode.PUBLIC_IP_FORBIDDEN,
        message: verdict.message,
        ...(verdict.status === 401
          ? { headers: { 'www-authenticate': 'Basic realm="tunnel2", charset="UTF-8"' } }
          : {}),
      },
    };
  }
  if (connection.session.draining) return { refusal: restarting(route.name) };
  const retryAfterS = connection.rate?.take() ?? 0;
  if (retryAfterS > 0) {
    return {
      refusal: {
        code: EdgeErrorCode.RATE_LIMITED,
        message: `tunnel ${route.name} is over its request rate: retry in ${retryAfterS} s`,
        retryAfterS,
      },
    };
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > options.maxRequestBodyBytes) {
    return {
      refusal: {
        code: EdgeErrorCode.BODY_TOO_LARGE,
        message: `request body of ${declared} bytes exceeds this edge's limit of ${options.maxRequestBodyBytes}`,
      },
    };
  }
  const headers = forwardedHeaders(req, route, origin);
  // An upgrade keeps the two fields that ask for it; everything else hop-by-hop is dropped.
  if (arrival.upgrade) headers.push('Connection', 'Upgrade', 'Upgrade', String(req.headers.upgrade));
  try {
    return {
      payload: encodeRequestHead(
        { method: req.method ?? 'GET', target: route.target, headers },
        connection.session.peerSettings.maxFrameSize,
      ),
    };
  } catch (err) {
    const tooLarge = err instanceof ProtocolError && err.code === ProtocolErrorCode.HEAD_TOO_LARGE;
    return {
      refusal: tooLarge
        ? {
            code: EdgeErrorCode.HEADERS_TOO_LARGE,
            message: `request head too large for the tunnel: ${(err as Error).message}`,
          }
        : { code: EdgeErrorCode.BAD_REQUEST, message: 'request head cannot be carried through the tunnel' },
    };
  }
}

/** The name has no live agent here: a reserved name waits (bounded) for its agent to reconnect. */
async function awaitAgent(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
): Promise<void> {
  // The one cluster branch: the owner is another node. A request another node forwarded is answered here.
  const cluster = options.cluster;
  if (cluster !== undefined && arrival.via === undefined && isValidSessionName(route.name)) {
    let owner: OwnerEntry | undefined;
    try {
      owner = await cluster.owner(route.name);
    } catch {
      owner = undefined; // missingSession below asks again and says the registry is unreachable
    }
    if (arrival.gone) return;
    const deadline = Date.now() + options.reconnectWaitMs;
    const passed = new Set<string>();
    // A waiting request counts as in flight: a draining node must not stop under it.
    const wait = (): void => {
      options.inFlight.start();
      void awaitAcrossNodes(arrival, route, options, cluster, deadline, passed, lost).finally(() =>
        options.inFlight.finish(),
      );
    };
    const lost = (gone: OwnerEntry): void => {
      passed.add(ownerKey(gone));
      wait();
    };
    if (owner !== undefined) arrival.forward(owner, cluster, lost);
    else wait();
    return;
  }
  const refusal = await missingSession(route.name, options.sessions);
  if (arrival.gone) return;
  if (refusal.code !== EdgeErrorCode.TUNNEL_OFFLINE || options.reconnectWaitMs === 0) {
    arrival.refuse(refusal);
    return;
  }
  let unwatch = (): void => {};
  const cancel = options.sessions.awaitArrival(route.name, options.reconnectWaitMs, (connection) => {
    unwatch();
    if (arrival.gone) return;
    if (connection === undefined) arrival.refuse(refusal);
    else dispatch(arrival, route, options, true);
  });
  if (cancel === undefined) arrival.refuse(refusal);
  else unwatch = arrival.watch(cancel);
}

function ownerKey(owner: OwnerEntry): string {
  return `${owner.nodeId}#${owner.epoch}`;
}

/**
 * The reconnect wait across nodes: until `deadline`, asks the registry every CLUSTER_POLL_MS where the
 * session is, and forwards as soon as it is live on a node that answers (an owner in `passed` did not
 * answer, or no longer held it: only a newer claim is tried), or dispatches here once the agent arrives
 * here. A record left by a dead node (its node unannounced or unreachable) is waited out like a
 * reconnecting agent: the agent claims the name again elsewhere with a newer epoch. Never a hang: the
 * wait ends at the deadline with 502 (offline, or the node that did not answer), and the number of
 * waiters per name is the session table's bound.
 */
async function awaitAcrossNodes(
  arrival: Arrival,
  route: IngressRoute,
  options: TunnelIngressOptions,
  cluster: Cluster,
  deadline: number,
  passed: Set<string>,
  lost: (owner: OwnerEntry) => void,
): Promise<void> {
  let last: OwnerEntry | undefined;
  for (let round = 0; round < CLUSTER_MAX_ROUNDS; round++) {
    const local = options.sessions.get(route.name);
    if (local?.ready === true && !local.session.draining) {
      dispatch(arrival, route, options, true);
      return;
    }
    let finding: OwnerFinding;
    try {
      finding = await cluster.find(route.name);
    } catch {
      if (!arrival.gone) arrival.refuse(registryUnavailable(route.name));
      return;
    }
    if (arrival.gone) return;
    if (finding.state === 'none') {
      arrival.refuse({
        code: EdgeErrorCode.UNKNOWN_SESSION,
        message: `no tunnel named "${route.name}" is connected to this edge`,
      });
      return;
    }
    if (finding.state === 'remote') {
      if (!passed.has(ownerKey(finding.entry))) {
        arrival.forward(finding.entry, cluster, lost);
        return;
      }
      last = finding.entry;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    // Wakes early when the agent arrives here; otherwise asks the registry again after the poll period.
    const outcome = await new Promise<'next' | 'full'>((resolve) => {
      let unwatch = (): void => {};
      const cancel = options.sessions.awaitArrival(route.name, Math.min(CLUSTER_POLL_MS, remaining), () => {
        unwatch();
        resolve('next');
      });
      if (cancel === undefined) resolve('full');
      else
        unwatch = arrival.watch(() => {
          cancel();
          resolve('next');
        });
    });
    if (arrival.gone) return;
    if (outcome === 'full') break;
  }
  arrival.refuse(last === undefined ? offline(route.name) : unreachableOwner(route.name, last));
}

/**
 * A plain public request as an arrival. A class rather than an object of closures: the hot path allocates
 * one object per request, its methods live on the prototype.
 */
class HttpArrival implements Arrival {
  readonly req: IncomingMessage;
  readonly upgrade = false;
  readonly #res: ServerResponse;
  readonly #route: IngressRoute;
  readonly #options: TunnelIngressOptions;
  readonly via: ClientOrigin | undefined;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    route: IngressRoute,
    options: TunnelIngressOptions,
    via: ClientOrigin | undefined,
  ) {
    this.req = req;
    this.#res = res;
    this.#route = route;
    this.#options = options;
    this.via = via;
  }

  forward(owner: OwnerEntry, cluster: Cluster, lost?: (owner: OwnerEntry) => void): void {
    const { req } = this;
    const res = this.#res;
    const options = this.#options;
    const name = this.#route.name;
    const headers = cluster.hopHeaders(req, hopOrigin(req, options));
    // With Expect: 100-continue the owner's backend decides on the body: the hop relays its 100 or its
    // early final answer.
    const hasBody = requestHasBody(req);
    options.inFlight.start();
    const onDone = (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }): void => {
      try {
        settle(outcome, detail);
      } finally {
        // After `lost` took the request on: the in-flight count never dips to zero in between.
        options.inFlight.finish();
      }
    };
    const settle = (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }): void => {
      if (outcome === 'moved') {
        cluster.notHere(name, owner);
        if (lost !== undefined && !res.destroyed) lost(owner);
        return;
      }
      if (outcome === 'unreachable') {
        cluster.unreachable(owner);
        options.logger.warn(
          { err: detail.err, session: name, node: owner.nodeId },
          'cluster: node unreachable',
        );
        if (res.headersSent || res.destroyed) return;
        // Nothing of a bodyless request was consumed: it waits for the agent to appear on a live node.
        if (lost !== undefined && !hasBody) lost(owner);
        else {
          const refusal = unreachableOwner(name, owner);
          sendEdgeError(res, refusal.code, refusal.message, refusal.retryAfterS);
        }
        return;
      }
      if (
        detail.edgeError === EdgeErrorCode.UNKNOWN_SESSION ||
        detail.edgeError === EdgeErrorCode.TUNNEL_OFFLINE
      ) {
        cluster.notHere(name, owner);
      } else {
        cluster.counters.forwarded[outcome]++;
      }
    };
    cluster.hop.forward(owner, req, res, headers, hasBody, onDone, lost !== undefined);
  }

  get gone(): boolean {
    return this.#res.destroyed;
  }

  refuse({ code, message, retryAfterS, headers }: Refusal): void {
    sendEdgeError(this.#res, code, message, retryAfterS, headers);
  }

  watch(onGone: () => void): () => void {
    const res = this.#res;
    res.once('close', onGone);
    return () => res.off('close', onGone);
  }

  start(stream: MuxStream, payload: Buffer): void {
    const { req } = this;
    const inFlight = this.#options.inFlight;
    inFlight.start();
    const cluster = this.#options.cluster;
    if (cluster !== undefined) this.#res.setHeader('x-tunnel2-node', cluster.nodeId);
    const exchange = new TunnelExchange(req, this.#res, stream, {
      name: this.#route.name,
      responseTimeoutMs: this.#options.responseTimeoutMs,
      maxRequestBodyBytes: this.#options.maxRequestBodyBytes,
      onFinish: () => inFlight.finish(),
    });
    const hasBody = requestHasBody(req);
    stream.sendHeaders(payload, !hasBody);
    if (hasBody) exchange.pumpRequestBody();
    else req.resume();
  }
}

/** Carries one routed public request into its session's tunnel, or answers why it cannot. */
export function handleTunnelRequest(
  req: IncomingMessage,
  res: ServerResponse,
  route: IngressRoute,
  options: TunnelIngressOptions,
  via?: ClientOrigin,
): void {
  dispatch(new HttpArrival(req, res, route, options, via), route, options, false);
}

/** Carries a public WebSocket upgrade into the tunnel: the backend's answer decides what happens next. */
export function handleTunnelUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  route: IngressRoute,
  options: TunnelIngressOptions,
  via?: ClientOrigin,
): void {
  const arrival: Arrival = {
    req,
    upgrade: true,
    via,
    forward(owner, cluster) {
      const headers = cluster.hopHeaders(req, hopOrigin(req, options));
      options.inFlight.start();
      cluster.hop.forwardUpgrade(
        owner,
        req,
        socket,
        head,
        headers,
        (err) => {
          options.inFlight.finish();
          cluster.unreachable(owner);
          options.logger.warn({ err, session: route.name, node: owner.nodeId }, 'cluster: node unreachable');
          rejectUpgrade(socket, {
            code: EdgeErrorCode.NODE_UNREACHABLE,
            message: `tunnel ${route.name}: the edge node holding it (${quoteForEcho(owner.nodeId, 64)}) cannot be reached`,
          });
        },
        () => {
          cluster.counters.forwarded.ok++;
          options.inFlight.finish();
        },
      );
    },
    refuse: (refusal) => rejectUpgrade(socket, refusal),
    start(stream, payload) {
      options.inFlight.start();
      const tunnel = new UpgradeTunnel(socket, stream, {
        name: route.name,
        responseTimeoutMs: options.responseTimeoutMs,
        onFinish: () => options.inFlight.finish(),
      });
      stream.sendHeaders(payload, false);
      tunnel.pumpClientBytes(head);
    },
    get gone() {
      return socket.destroyed;
    },
    watch(onGone) {
      socket.once('close', onGone);
      return () => socket.off('close', onGone);
    },
  };
  dispatch(arrival, route, options, false);
}

/** A request has a body when it declares a non-zero length or uses a transfer coding (RFC 9112 §6.3). */
function requestHasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

// The six fields a client could use to lie about where a request came from. Length first: most header
// names are not 9, 15, 16, 17 or 18 characters long, and those skip the lowercase copy.
const forwardingFields: ReadonlySet<string> = new Set([
  'forwarded',
  'x-real-ip',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-forwarded-prefix',
  // What one edge node vouches for to another: never passed on, and believed only when signed.
  'x-tunnel2-node-auth',
  'x-tunnel2-node-peer',
  'x-tunnel2-node-client',
]);

function isForwardingField(name: string): boolean {
  const n = name.length;
  return (n === 9 || (n >= 15 && n <= 19) || n === 21) && forwardingFields.has(name.toLowerCase());
}

/** A host[:port] as a Host field may carry it: a DNS name, IPv4 or [IPv6], optional port. */
const validHost =
  /^(?:[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
/** A path prefix: starts with `/`, visible ASCII only. */
const validPrefix = /^\/[\x21-\x7e]*$/;

/** The one value of a single-valued field a trusted proxy set, or undefined when absent or repeated. */
function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value.trim() : undefined;
}

/** What the edge states about a request's client in X-Forwarded-*: its own view, or a trusted proxy's. */
function decideForwarding(
  req: IncomingMessage,
  origin: ClientOrigin | undefined,
): { peer: string; proto: string; host: string; prefix: string } {
  const peer = origin?.peer ?? req.socket.remoteAddress ?? '';
  let proto: string = 'encrypted' in req.socket ? 'https' : 'http';
  let host = req.headers.host ?? '';
  let prefix = '';
  if (origin?.trustedPeer === true) {
    const givenProto = single(req.headers['x-forwarded-proto'])?.toLowerCase();
    if (givenProto === 'http' || givenProto === 'https') proto = givenProto;
    const givenHost = single(req.headers['x-forwarded-host']);
    if (givenHost !== undefined && givenHost.length <= 255 && validHost.test(givenHost)) host = givenHost;
    const givenPrefix = single(req.headers['x-forwarded-prefix']);
    if (givenPrefix !== undefined && givenPrefix.length <= 1024 && validPrefix.test(givenPrefix)) {
      prefix = givenPrefix.endsWith('/') ? givenPrefix.slice(0, -1) : givenPrefix;
    }
  }
  return { peer, proto, host, prefix };
}

/** What this node decided about a client, for the node it forwards the request to. */
function hopOrigin(req: IncomingMessage, options: TunnelIngressOptions): HopOrigin {
  const origin = options.clients.trustsAnyone ? options.clients.resolve(req) : undefined;
  const decided = decideForwarding(req, origin);
  return {
    ...decided,
    client: origin?.address ?? normalizeAddress(req.socket.remoteAddress ?? ''),
    chain: origin?.chain,
  };
}

/**
 * The request's headers as the backend receives them: hop-by-hop fields dropped, every forwarding field
 * the client sent removed, and the edge's own set. From a trusted proxy (`origin.trustedPeer`), its
 * X-Forwarded-For chain is kept with the proxy appended, and its X-Forwarded-Proto / -Host / -Prefix are
 * taken when valid. Forwarded and X-Real-IP never pass: the edge states the same in X-Forwarded-*.
 */
function forwardedHeaders(
  req: IncomingMessage,
  route: IngressRoute,
  origin: ClientOrigin | undefined,
): RawHeaders {
  const headers = withoutHopByHop(req.rawHeaders);
  let write = 0;
  for (let read = 0; read < headers.length; read += 2) {
    if (isForwardingField(headers[read]!)) continue;
    headers[write] = headers[read]!;
    headers[write + 1] = headers[read + 1]!;
    write += 2;
  }
  headers.length = write;
  const { peer, proto, host, prefix: given } = decideForwarding(req, origin);
  let prefix = given;
  headers.push('X-Forwarded-For', origin?.chain === undefined ? peer : `${origin.chain}, ${peer}`);
  headers.push('X-Forwarded-Proto', proto);
  headers.push('X-Forwarded-Host', host);
  if (route.via === 'path') prefix += `/session/${route.name}`;
  if (prefix !== '') headers.push('X-Forwarded-Prefix', prefix);
  return headers;
}

async function missingSession(name: string, sessions: SessionTable): Promise<Refusal> {
  if (!isValidSessionName(name)) {
    return {
      code: EdgeErrorCode.UNKNOWN_SESSION,
      message: `no tunnel named ${quoteForEcho(name)}: not a valid session name`,
    };
  }
  try {
    const record = await sessions.lookup(name);
    if (record !== undefined) {
      return offline(name);
    }
  } catch {
    // A registry that cannot answer must not turn into a misleading 404, nor wait for an agent that may
    // well be connected to another node: a prompt 503 with its own code.
    return {
      code: EdgeErrorCode.REGISTRY_UNAVAILABLE,
      message: `tunnel ${name} is not on this node and the session registry is unavailable to find it`,
      retryAfterS: 5,
    };
  }
  return {
    code: EdgeErrorCode.UNKNOWN_SESSION,
    message: `no tunnel named "${name}" is connected to this edge`,
  };
}
