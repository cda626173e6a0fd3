import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { resolveIngressRoute } from './ingress-route.js';

/** The header that carries a request's id from the client (or a proxy in front) through the edge to the agent. */
export const REQUEST_ID_HEADER = 'x-request-id';

// An id from a proxy in front (nginx's $request_id, a load balancer's trace id) is kept so one id follows
// the request end to end; anything else (too long, odd characters, repeated) is replaced.
const acceptableId = /^[\w.:@/+=-]{1,128}$/;

// Ids this edge makes: a random per-process prefix (so ids from several edges or restarts do not collide)
// and a counter. As unique as a UUID for tracing, at the cost of one small string per request instead of
// random bytes and a 36-character format on the hot path.
const idPrefix = randomBytes(8).toString('hex');
let idCounter = 0;

/** A new request id, e.g. `3f9c1a0b7e2d4c55-1a2b`. */
export function newRequestId(): string {
  idCounter = idCounter === Number.MAX_SAFE_INTEGER ? 1 : idCounter + 1;
  return `${idPrefix}-${idCounter.toString(36)}`;
}

/**
 * Makes sure `req` carries an acceptable `x-request-id` and returns it. The id is added to `rawHeaders`,
 * which is what the tunnel forwards, so the agent receives it as an ordinary request header.
 */
export function ensureRequestId(req: IncomingMessage): string {
  const given = req.headers[REQUEST_ID_HEADER];
  if (typeof given === 'string' && acceptableId.test(given)) return given;
  const id = newRequestId();
  if (given !== undefined) {
    const raw = req.rawHeaders;
    for (let i = raw.length - 2; i >= 0; i -= 2) {
      if (raw[i]!.toLowerCase() === REQUEST_ID_HEADER) raw.splice(i, 2);
    }
  }
  req.headers[REQUEST_ID_HEADER] = id;
  req.rawHeaders.push('X-Request-Id', id);
  return id;
}

/**
 * What the ids hook into: an Edge (build-edge.ts) is one. Named by shape, so the public side does not
 * import the module that assembles it.
 */
export interface RequestIdHost {
  readonly app: { readonly server: Server };
  readonly options: { readonly domain: string };
}

/**
 * Gives every public request and upgrade an id before the edge routes it (the listeners are prepended, so
 * they run before the tunnel encodes the head), and logs each request at debug level with that id.
 * Returns a function that removes the listeners.
 */
export function installRequestIds(edge: RequestIdHost, logger: Logger): () => void {
  const server = edge.app.server;
  const log = logger.child({ component: 'ingress' });
  const domain = edge.options.domain;
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = ensureRequestId(req);
    // The access log is debug: a line per request costs more than the tunnel's own work at high rates.
    if (!log.isLevelEnabled('debug')) return;
    const started = performance.now();
    res.once('close', () => {
      const route = resolveIngressRoute(req.headers.host, req.url ?? '/', domain);
      const edgeError = res.getHeader('x-tunnel2-error');
      log.debug(
        {
          requestId,
          session: route?.name,
          method: req.method,
          url: req.url,
          status: res.writableFinished ? res.statusCode : undefined,
          aborted: !res.writableFinished,
          durationMs: Math.round((performance.now() - started) * 100) / 100,
          ...(edgeError === undefined ? {} : { edgeError }),
        },
        'request',
      );
    });
  };
  const onUpgrade = (req: IncomingMessage): void => {
    const requestId = ensureRequestId(req);
    if (log.isLevelEnabled('debug'))
      log.debug({ requestId, url: req.url, upgrade: req.headers.upgrade }, 'upgrade');
  };
  server.prependListener('request', onRequest);
  server.prependListener('checkContinue', onRequest);
  server.prependListener('upgrade', onUpgrade);
  return () => {
    server.off('request', onRequest);
    server.off('checkContinue', onRequest);
    server.off('upgrade', onUpgrade);
  };
}
