import { isValidSessionName } from '../agents/session-name.js';

/** Where a public request goes: the session name and the path the backend should see. */
export interface IngressRoute {
  name: string;
  target: string;
  via: 'host' | 'path';
}

/** The host without its port, lowercased; undefined when absent. Handles `[::1]:8080`. */
export function hostnameOf(hostHeader: string | undefined): string | undefined {
  if (hostHeader === undefined || hostHeader === '') return undefined;
  const host = hostHeader.toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    return end === -1 ? host : host.slice(0, end + 1);
  }
  const colon = host.indexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}

const PATH_PREFIX = '/session/';

/**
 * Routes by host (`<name>.<domain>`) first, then by path (`/session/<name>/...`, prefix stripped).
 * Returns undefined for requests meant for the edge itself.
 */
export function resolveIngressRoute(
  hostHeader: string | undefined,
  requestTarget: string,
  domain: string,
): IngressRoute | undefined {
  let url = requestTarget;
  let host = hostHeader;
  if (url.charCodeAt(0) !== 47 /* / */) {
    // Absolute form (RFC 9112 §3.2.2): its authority replaces Host, and only its path travels on, so the
    // backend never sees, let alone contacts, another origin.
    const absolute = parseAbsoluteForm(url);
    if (absolute === undefined) return undefined;
    host = absolute.host;
    url = absolute.path;
  }
  const hostname = hostnameOf(host);
  if (hostname !== undefined && hostname.length > domain.length + 1 && hostname.endsWith(domain)) {
    const dot = hostname.length - domain.length - 1;
    if (hostname.charCodeAt(dot) === 46 /* . */) {
      const name = hostname.slice(0, dot);
      if (isValidSessionName(name)) return { name, target: url, via: 'host' };
    }
  }
  if (url.startsWith(PATH_PREFIX)) {
    let end = PATH_PREFIX.length;
    while (end < url.length) {
      const c = url.charCodeAt(end);
      if (c === 47 /* / */ || c === 63 /* ? */) break;
      end++;
    }
    const name = url.slice(PATH_PREFIX.length, end).toLowerCase();
    if (name === '') return undefined;
    const rest = url.slice(end);
    const target = rest === '' ? '/' : rest.charCodeAt(0) === 63 ? `/${rest}` : rest;
    return { name, target, via: 'path' };
  }
  return undefined;
}

function parseAbsoluteForm(target: string): { host: string; path: string } | undefined {
  if (!/^https?:\/\//i.test(target) || !URL.canParse(target)) return undefined;
  const url = new URL(target);
  return { host: url.host, path: `${url.pathname}${url.search}` };
}
