import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from './send-response.js';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** The request path, without the query. */
  path: string;
  /** The raw query string, without the '?' ('' if none). */
  query: string;
  /** The values of the pattern's `:name` segments, in order (still percent-encoded). */
  params: readonly string[];
  /**
   * Drops the connection on purpose (e.g. /abort-after): the response is not finished, but it is not
   * counted as a client that went away either.
   */
  dropConnection(): void;
}

export interface Route {
  /** Methods served; a route serving GET also serves HEAD. 'ANY' serves every method. */
  readonly methods: readonly string[] | 'ANY';
  /** Like '/bytes/:n': ':name' matches one non-empty segment, a trailing '/*' any sub-path or none. */
  readonly path: string;
  readonly description: string;
  readonly handle: (ctx: RouteContext) => void | Promise<void>;
}

interface CompiledRoute {
  route: Route;
  segments: readonly string[];
  wildcard: boolean;
}

export type RequestHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  dropConnection: (res: ServerResponse) => void,
) => void;

function allows(route: Route, method: string): boolean {
  if (route.methods === 'ANY') return true;
  return route.methods.includes(method) || (method === 'HEAD' && route.methods.includes('GET'));
}

function allowHeader(routes: readonly CompiledRoute[]): string {
  const methods = new Set<string>();
  for (const { route } of routes) {
    if (route.methods === 'ANY') return '*';
    for (const method of route.methods) methods.add(method);
    if (route.methods.includes('GET')) methods.add('HEAD');
  }
  return [...methods].join(', ');
}

function matchSegments(compiled: CompiledRoute, segments: readonly string[]): string[] | undefined {
  const pattern = compiled.segments;
  if (compiled.wildcard ? segments.length < pattern.length : segments.length !== pattern.length)
    return undefined;
  const params: string[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const expected = pattern[i]!;
    const actual = segments[i]!;
    if (expected.startsWith(':')) {
      if (actual === '') return undefined;
      params.push(actual);
    } else if (expected !== actual) {
      return undefined;
    }
  }
  return params;
}

/**
 * A minimal router for the hot path: static paths are one Map lookup, the few patterned ones a short
 * scan over pre-split segments; no URL object is built. Unknown paths get a 404 naming the path, a known
 * path with the wrong method a 405 with `Allow`. A handler that throws or rejects gets a 500 if nothing
 * was sent yet, else its connection is dropped (a half-sent response must not look complete); a failure
 * caused by the client leaving is ignored.
 */
export function createRouter(routes: readonly Route[]): RequestHandler {
  const exact = new Map<string, CompiledRoute[]>();
  const patterned: CompiledRoute[] = [];
  for (const route of routes) {
    const wildcard = route.path.endsWith('/*');
    const pattern = wildcard ? route.path.slice(0, -2) : route.path;
    const compiled: CompiledRoute = { route, segments: pattern.split('/'), wildcard };
    if (!wildcard && !pattern.includes('/:')) {
      const list = exact.get(pattern) ?? [];
      list.push(compiled);
      exact.set(pattern, list);
    } else {
      patterned.push(compiled);
    }
  }

  return (req, res, dropConnection) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);
    const method = req.method ?? 'GET';

    const candidates: { compiled: CompiledRoute; params: readonly string[] }[] = [];
    for (const compiled of exact.get(path) ?? []) candidates.push({ compiled, params: [] });
    if (candidates.length === 0 && patterned.length > 0) {
      const segments = path.split('/');
      for (const compiled of patterned) {
        const params = matchSegments(compiled, segments);
        if (params !== undefined) candidates.push({ compiled, params });
      }
    }
    if (candidates.length === 0) {
      sendJson(res, 404, { error: `no endpoint for ${method} ${url}`, method, path, url });
      return;
    }
    const chosen = candidates.find((c) => allows(c.compiled.route, method));
    if (chosen === undefined) {
      res.setHeader('allow', allowHeader(candidates.map((c) => c.compiled)));
      sendJson(res, 405, { error: `${method} is not allowed on ${path}`, method, path });
      return;
    }
    const fail = (): void => {
      // A body that failed because the client went away is already accounted for by the close.
      if (req.destroyed || res.destroyed) return;
      if (res.headersSent) dropConnection(res);
      else sendJson(res, 500, { error: 'handler failed', path });
    };
    try {
      const done = chosen.compiled.route.handle({
        req,
        res,
        path,
        query,
        params: chosen.params,
        dropConnection: () => dropConnection(res),
      });
      if (done !== undefined) done.catch(fail);
    } catch {
      fail();
    }
  };
}
