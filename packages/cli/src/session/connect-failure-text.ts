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
      // Not a URL: said like every other answer that is not an edge's.
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

/** Node's codes for a certificate chain this machine cannot verify up to a CA it trusts. */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_UNTRUSTED',
  'INVALID_CA',
]);
const OUT_OF_DATE = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const WRONG_NAME = 'ERR_TLS_CERT_ALTNAME_INVALID';

/** The edge answered, with a TLS certificate that does not verify: something is there, not nothing. */
export function isCertificateProblem(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && (UNTRUSTED.has(code) || OUT_OF_DATE.has(code) || code === WRONG_NAME);
}

/** What a certificate that does not verify means to someone starting an agent, and what to do about it. */
function certificateText(server: string, code: string): string {
  if (UNTRUSTED.has(code)) {
    return (
      `the edge at ${server} answers with a TLS certificate that is not trusted here (${code}): if a private ` +
      'CA signed it, trust that CA with NODE_EXTRA_CA_CERTS=/path/to/ca.pem; if a public CA did, the edge ' +
      'must send the intermediates after its certificate (a full chain)'
    );
  }
  if (OUT_OF_DATE.has(code)) {
    return `the edge at ${server} answers with a TLS certificate that has expired or is not valid yet (${code})`;
  }
  return `the edge's TLS certificate does not name ${new URL(server).hostname} (${code}): use the name it was issued for in --server`;
}

/** Why nothing answered at `server`: a host name that does not resolve is said in so many words. */
export function unreachable(server: string, err: Error): string {
  const code = (err as { code?: unknown }).code;
  if (isCertificateProblem(err)) return certificateText(server, code as string);
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
