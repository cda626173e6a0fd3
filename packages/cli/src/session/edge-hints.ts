import { MAX_EARLY_UPGRADE_BYTES } from '@tunnel2/protocol';

/** A `hint` event: advice that changes nothing by itself (`code`: a stable TUNNEL2_HINT_* name). */
export interface Hint {
  code: string;
  message: string;
}

// The hints that say an edge is older than the agent, and to upgrade it. Each is said once per run.

/** The `hint` code of an HTTP/2 backend behind an edge that serves no HTTP/2 to its clients. */
export const EDGE_NO_HTTP2_HINT = 'TUNNEL2_HINT_EDGE_NO_HTTP2';

/**
 * The `hint` code of an edge that sent more of a WebSocket client's bytes before the backend's answer than
 * the protocol allows (an edge from before the limit): the agent resets such an upgrade.
 */
export const EDGE_EARLY_BYTES_HINT = 'TUNNEL2_HINT_EDGE_EARLY_BYTES';

const UPGRADE_THE_EDGE = 'upgrade the edge (@tunnel2/edge, or `tunnel2 server` of @tunnel2/cli)';

/** An HTTP/2 backend (`protocol`: h2c or h2) that gRPC and HTTP/2 clients cannot reach through `server`. */
export function noHttp2Hint(server: string, protocol: string): Hint {
  return {
    code: EDGE_NO_HTTP2_HINT,
    message:
      `the edge at ${server} does not serve HTTP/2: gRPC and HTTP/2 clients cannot reach this ` +
      `${protocol} backend through it (HTTP/1.1 clients still can); ${UPGRADE_THE_EDGE}`,
  };
}

/** Which tunnel, which edge, what happened to the upgrade, and what to do. */
export function earlyBytesHint(tunnel: string, server: string): Hint {
  return {
    code: EDGE_EARLY_BYTES_HINT,
    message:
      `tunnel ${tunnel}: the edge at ${server} is older than this agent: it sent more than ` +
      `${MAX_EARLY_UPGRADE_BYTES / 1024} KiB of a WebSocket client's bytes before the backend's answer, ` +
      `and the agent reset that upgrade (the client got a 502); ${UPGRADE_THE_EDGE}`,
  };
}
