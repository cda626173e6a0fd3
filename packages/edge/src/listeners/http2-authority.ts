// Whether an HTTP/2 request's `host` and `:authority` name one authority (RFC 9113 §8.3.1 makes a request
// whose two disagree malformed). Equal but for case, or for the scheme's default port spelled out on one
// side (`example.com:80` and `example.com` over h2c, as a proxy in front may write them), they agree: as
// Envoy normalises both before comparing, a legitimate equivalent is not refused.

/**
 * True when `host` and `authority` name the same authority for `scheme`. Called only when a request
 * carries both (rare: HTTP/2 clients send `:authority` alone), so the tunnel path pays nothing.
 */
export function sameAuthority(host: string, authority: string, scheme: unknown): boolean {
  const a = host.toLowerCase();
  const b = authority.toLowerCase();
  if (a === b) return true;
  const port = scheme === 'https' ? ':443' : scheme === 'http' ? ':80' : undefined;
  if (port === undefined) return false;
  return withoutPort(a, port) === withoutPort(b, port);
}

/** `name` without a trailing `port` (an IPv6 literal's colons are inside its brackets, never matched). */
function withoutPort(name: string, port: string): string {
  return name.endsWith(port) ? name.slice(0, -port.length) : name;
}
