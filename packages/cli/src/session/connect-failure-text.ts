import { terminalSafe } from '../terminal-text.js';

// The words for a connect that found no edge: nothing answered, or something that is not an edge did.

/**
 * What answered at `server` without an edge's code: a redirect (a proxy sending http:// to https://, or to
 * another path) says where to, since the edge may well be there; anything else is not an edge.
 */
export function notAnEdge(server: string, status: number, location: string | undefined): string {
  if (status >= 300 && status < 400 && location !== undefined) {
    let to: URL | undefined;
    try {
      to = new URL(location, server);
    } catch {
      // Not a URL: said as any other answer that is not an edge's.
    }
    if (to !== undefined && (to.protocol === 'https:' || to.protocol === 'http:')) {
      // The agent path is the edge's own, appended to --server: the origin is what to try.
      return terminalSafe(
        `${server} redirects to ${to.href} (HTTP ${status}): if the edge is there, use --server ${to.origin}`,
      );
    }
  }
  return `${server} is not a tunnel2 edge (HTTP ${status}): check --server <url> or TUNNEL2_SERVER`;
}

/** Why nothing answered at `server`: a host name that does not resolve is said in so many words. */
export function unreachable(server: string, err: Error): string {
  const code = (err as { code?: unknown }).code;
  if (code === 'ENOTFOUND') return `no such host: ${new URL(server).hostname} (the edge at ${server})`;
  // A resolver that did not answer (offline, a DNS server down) is not a host that does not exist.
  if (code === 'EAI_AGAIN')
    return `cannot resolve ${new URL(server).hostname}: the DNS server did not answer (EAI_AGAIN)`;
  return `cannot reach the edge at ${server}: ${describe(err)}`;
}

function describe(err: Error): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : err.message;
}
