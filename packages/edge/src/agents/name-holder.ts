import type { SessionRecord } from '@tunnel2/registry';
import { EdgeErrorCode } from '../errors.js';
import type { TunnelEntry } from './tunnel-entry.js';

/**
 * Who holds a name a claim could not have, worded for the agent that asked. The code stays NAME_IN_USE
 * (409) whatever the case; the header `x-tunnel2-name-holder` says which case it is, so an agent can word
 * its advice without reading the message:
 * - `other`: a live session of another owner;
 * - `reserved`: another owner's session ended and the name waits out its reconnect grace (with numbers);
 * - `self`: the same token-less owner (agent key) serves it from another run, live: refused rather than
 *   taken over. The key is implicit (one per user's config directory), so a user who runs the same command
 *   in a second terminal is told so instead of silently stopping the first. A token is shared on purpose
 *   (a new deployment replacing the old one): its newer run takes the name over, as before, and the older
 *   one is told SESSION_REPLACED and stops; neither case flaps.
 */
export const NAME_HOLDER_HEADER = 'x-tunnel2-name-holder';

export type NameHolder = 'other' | 'reserved' | 'self';

export interface NameRefusal {
  code: EdgeErrorCode;
  message: string;
  holder: NameHolder;
  retryAfterS?: number | undefined;
}

/** The refusal for a name the registry gave to another owner (`record`, as the claim returned it). */
export function heldByOther(
  name: string,
  record: SessionRecord | undefined,
  reconnectGraceMs: number,
  now = Date.now(),
): NameRefusal {
  if (record === undefined || record.connected) {
    return {
      code: EdgeErrorCode.NAME_IN_USE,
      message: `subdomain "${name}" is taken by another agent`,
      holder: 'other',
    };
  }
  // A reservation's end is its disconnect plus the grace (the same on every node of a cluster). Whole
  // seconds down for the past and up for the future, so "N s ago, free in M s" adds up to the grace.
  const freeInS = Math.max(1, Math.ceil((record.expiresAt - now) / 1000));
  const agoS = Math.max(0, Math.floor((now - (record.expiresAt - reconnectGraceMs)) / 1000));
  return {
    code: EdgeErrorCode.NAME_IN_USE,
    message: `subdomain "${name}" is reserved for the agent that disconnected ${agoS} s ago, free in ${freeInS} s`,
    holder: 'reserved',
    retryAfterS: freeInS,
  };
}

/**
 * A live tunnel of the same anonymous owner that another run of that owner asks for: refused (see `self`
 * above). `subject` names it in the message: `subdomain "x"`, or `port 40000` for a TCP port (the same
 * rule: a second run must not silently take a port from the first either). Undefined when the claim may go ahead: a token's claim, no live entry on this node, another
 * owner's (the registry decides), the same run reconnecting (it replaces its older connection, which may
 * be half-open), an agent that sent no run id (an older agent: it takes over as before), or one that said
 * it is leaving. A live entry on another node of a cluster is not seen here: the registry records no run,
 * so there the newer run takes over and the older one stops, as with a token.
 */
export function heldBySelf(
  subject: string,
  entry: TunnelEntry | undefined,
  claim: { owner: string; run: string | undefined; anonymous: boolean },
): NameRefusal | undefined {
  const { owner, run } = claim;
  if (!claim.anonymous || entry === undefined || entry.owner !== owner || entry.leaving) return undefined;
  const held = entry.connection.run;
  if (run === undefined || held === undefined || held === run) return undefined;
  const since = new Date(entry.connection.connectedAt).toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    code: EdgeErrorCode.NAME_IN_USE,
    message: `${subject} is already served by another tunnel2 run of yours, since ${since}: stop that one first`,
    holder: 'self',
  };
}
