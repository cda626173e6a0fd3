import {
  type Hello,
  isProtocolError,
  negotiateVersion,
  type ProtocolSettings,
  type SessionRole,
  type WindowBudget,
} from '@tunnel2/protocol';

/** Streams one link carries at once: every request in flight between two nodes, for every tunnel. */
export const LINK_MAX_STREAMS = 4096;
/**
 * The receive window a link stream starts with, each way: 16 KiB (an agent session's streams start at
 * 256 KiB). Small enough that every stream the link may carry, all full of bytes nobody reads, fit in the
 * session window with room to spare (below); a stream that is read fast grows its window by auto-tuning,
 * from the link's growth budget.
 */
export const LINK_STREAM_WINDOW = 16 * 1024;
/**
 * What a link stream is granted on top of its 16 KiB as soon as it opens, as growth from the budgets (its
 * tenants' shares, the link's, the edge's), while the link's is at most half taken (link-shares.ts): up to
 * an agent session stream's 256 KiB, so that between distant nodes a response does not wait for round
 * trips to grow its window (measured at a 20 ms round trip: 256 KiB took 117 ms from 16 KiB, 29 ms from
 * 256 KiB). Unread streams hold it as they hold any growth: within the budgets, so within the session
 * window (below).
 */
export const LINK_EAGER_GROWTH = 256 * 1024 - 16 * 1024;
/**
 * The least heartbeat interval a link runs: the protocol's 10 s, not the 3 s an edge announces to agents.
 * A frozen laptop should fail its first request in seconds; a peer node that stalls for 6-9 s (a long GC,
 * CPU starvation) should not have every tenant's cross-node streams reset with its link.
 */
export const LINK_HEARTBEAT_INTERVAL_MS = 10_000;
/** Growth above the initial windows a link's streams may hold together (the session budget). */
export const LINK_GROWTH_BUDGET = 32 * 1024 * 1024;
/**
 * The session window of a link, each way: 96 MiB, sized so that streams that are not read can never fill
 * it. A stream's bytes hold session credit until the far side took them, and session credit comes back a
 * quarter of this window at a time, so what a sender may have outstanding on the session is at most
 *   LINK_MAX_STREAMS × LINK_STREAM_WINDOW + LINK_GROWTH_BUDGET + LINK_SESSION_WINDOW / 4
 *   = 64 MiB + 32 MiB + 24 MiB = 120 MiB,
 * less than the window the sender is granted (this plus the growth grant: 128 MiB). So a stream with
 * credit of its own can always send: an unread stream holds its own window, never its neighbours'. (A
 * 64 MiB window with 256 KiB streams let 560 unread downloads stall every tunnel between two nodes.)
 * The memory a node holds of one link is bounded by the streams' windows: 64 MiB + 32 MiB = 96 MiB.
 */
export const LINK_SESSION_WINDOW = (LINK_MAX_STREAMS * LINK_STREAM_WINDOW * 3) / 2;

/**
 * A link's session options: the edge's protocol settings, with the link's stream count and windows. Its
 * streams' window growth draws on the edge's budget (`edgeWindowBudget`), as agent sessions' does: a link's
 * stream at the ingress is read by a public client, who must not hold more than through an agent session.
 * A larger `initialStreamWindow` in the edge's settings does not apply to links (it would let unread
 * streams fill the session window); a smaller one does. Heartbeats run at LINK_HEARTBEAT_INTERVAL_MS at
 * the least.
 */
export function linkSessionOptions(
  role: SessionRole,
  protocol: Partial<ProtocolSettings>,
  edgeWindowBudget: WindowBudget,
): {
  role: SessionRole;
  settings: Partial<ProtocolSettings>;
  sessionWindowBudget: number;
  sharedWindowBudget: WindowBudget;
} {
  return {
    role,
    sessionWindowBudget: LINK_GROWTH_BUDGET,
    sharedWindowBudget: edgeWindowBudget,
    settings: {
      ...protocol,
      // 0 (heartbeats off) stays off; a shorter interval is raised to the link's.
      heartbeatIntervalMs:
        protocol.heartbeatIntervalMs === 0
          ? 0
          : Math.max(protocol.heartbeatIntervalMs ?? LINK_HEARTBEAT_INTERVAL_MS, LINK_HEARTBEAT_INTERVAL_MS),
      maxConcurrentStreams: LINK_MAX_STREAMS,
      initialStreamWindow: Math.min(protocol.initialStreamWindow ?? LINK_STREAM_WINDOW, LINK_STREAM_WINDOW),
      initialSessionWindow: Math.max(protocol.initialSessionWindow ?? 0, LINK_SESSION_WINDOW),
    },
  };
}

/**
 * Why a peer node's HELLO cannot be taken (it offers no protocol version this node speaks), or undefined.
 * Both ends of a link check it, as the edge does an agent's: a link is a session like any other.
 */
export function versionRefusal(hello: Hello): string | undefined {
  try {
    negotiateVersion(hello);
    return undefined;
  } catch (err) {
    if (!isProtocolError(err)) throw err;
    return err.message;
  }
}
