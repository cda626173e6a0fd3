import { type AgentError, AgentErrorCode } from '../errors.js';
import { isCertificateProblem } from '../session/connect-failure-text.js';
import type { Tunnel } from '../session/tunnel.js';
import type { Reporter } from '../terminal/reporter.js';

/** The `hint` event's code when no edge answered the first connect. */
export const NO_EDGE_HINT = 'TUNNEL2_HINT_NO_EDGE';

/** Host names that are this machine: only there can the user start the missing edge themselves. */
function isLocalHost(server: string): boolean {
  let host: string;
  try {
    host = new URL(server).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return false;
  }
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    /^127\.\d+\.\d+\.\d+$/.test(host) ||
    host === '::1' ||
    host === '0.0.0.0' ||
    host === '::'
  );
}

/**
 * What to do when nothing answers at `server`: start an edge here (when the address is this machine), or
 * name the one to use.
 */
export function noEdgeHint(server: string): string {
  if (!isLocalHost(server)) {
    return `no tunnel2 edge answers at ${server}. Check the address, or point at your edge with --server <url> or TUNNEL2_SERVER=<url>`;
  }
  return (
    `no tunnel2 edge answers at ${server}. Run one on this machine with "tunnel2 server" ` +
    '(in another terminal), or point at yours with --server <url> or TUNNEL2_SERVER=<url>'
  );
}

/**
 * After the first connect of a run fails because nothing answers at the edge's address, one line says how
 * to get an edge (the one the tunnel resolved, wherever it came from); the usual reconnect lines follow and it is not repeated. A run that was connected once
 * knows its edge exists: a later outage gets no advice.
 */
export function hintWhenNoEdge(tunnel: Tunnel, reporter: Reporter): void {
  let decided = false;
  tunnel.once('ready', () => {
    decided = true;
  });
  tunnel.on('error', (error: AgentError) => {
    if (decided) return;
    decided = true;
    // A certificate that does not verify came from something that answered: its own words say what to do.
    if (error.code === AgentErrorCode.EDGE_UNREACHABLE && !isCertificateProblem(error.cause))
      reporter.hint(NO_EDGE_HINT, noEdgeHint(tunnel.server));
  });
}
