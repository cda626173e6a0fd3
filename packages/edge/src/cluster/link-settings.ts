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
 * The session window of a link, each way: 64 MiB. A stream's bytes hold session credit until the far
 * side took them (a slow client keeps its stream's window full), so a window the size of an agent
 * session's (16 MiB, 64 streams of 256 KiB) would let a few slow downloads stall every tunnel between two
 * nodes. It is also the memory bound: at most this many bytes of one link are held by a node at once.
 */
export const LINK_SESSION_WINDOW = 64 * 1024 * 1024;

/**
 * A link's session options: the edge's protocol settings, with the link's stream count and window. Its
 * streams' window growth draws on the edge's budget (`edgeWindowBudget`), as agent sessions' does: a link's
 * stream at the ingress is read by a public client, who must not hold more than through an agent session.
 */
export function linkSessionOptions(
  role: SessionRole,
  protocol: Partial<ProtocolSettings>,
  edgeWindowBudget: WindowBudget,
): { role: SessionRole; settings: Partial<ProtocolSettings>; sharedWindowBudget: WindowBudget } {
  return {
    role,
    sharedWindowBudget: edgeWindowBudget,
    settings: {
      ...protocol,
      maxConcurrentStreams: LINK_MAX_STREAMS,
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
