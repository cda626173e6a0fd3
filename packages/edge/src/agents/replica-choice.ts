import type { TunnelEntry } from './tunnel-entry.js';

/**
 * Which replica of a name a new request (or WebSocket, or connection) goes to: the live one with the fewest
 * outstanding requests (streams open on its session plus requests queued for a slot), as HAProxy's
 * `leastconn`; ties go round robin from `turn`, so an idle pool still spreads. A replica whose agent is
 * draining (GOAWAY, SIGTERM) or whose session closed gets nothing new while another can take it; when none
 * can, the newest entry is returned and the caller answers as for a single agent (restarting, offline).
 * `avoid`: a replica that just refused this request (REFUSED_STREAM) is taken only if no other can be.
 */
export function pickReplica(
  entries: readonly TunnelEntry[],
  turn: number,
  avoid?: TunnelEntry,
): TunnelEntry | undefined {
  const count = entries.length;
  if (count <= 1) return entries[0];
  let best: TunnelEntry | undefined;
  let bestLoad = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) {
    const entry = entries[(turn + i) % count] as TunnelEntry;
    if (!entry.ready || entry.session.draining || entry.session.closed) continue;
    const load =
      entry.session.streams.size + entry.slots.waiting + (entry === avoid ? Number.MAX_SAFE_INTEGER / 2 : 0);
    if (load < bestLoad) {
      best = entry;
      bestLoad = load;
    }
  }
  return best ?? entries[count - 1];
}
