import { type EdgeErrorCode, statusByCode } from '../errors.js';
import type { ErrorFacts, ErrorWhere } from './error-facts.js';

/**
 * What each of the edge's own answers tells a person: a short title, where the failure is, and what to
 * do about it. The plain-text message stays the specific line the code path wrote; this adds the rest.
 */
interface Explanation {
  title: string;
  where: ErrorWhere;
  /** `wait`: "Retry in 5 seconds." when the answer carries Retry-After, else "Retry shortly.". */
  hint: (wait: string) => string;
}

const checkRequest = (what: string): Explanation => ({
  title: what,
  where: 'edge',
  hint: () =>
    'The request itself was refused by the edge: check the URL, its method and its size, then send it again.',
});

const clusterTrouble = (title: string): Explanation => ({
  title,
  where: 'edge',
  hint: (wait) => `${wait} If it persists, the edge's operator should look at its logs.`,
});

const explanations: Readonly<Record<EdgeErrorCode, Explanation>> = {
  TUNNEL2_ERR_UNKNOWN_SESSION: {
    title: 'Tunnel not found',
    where: 'edge',
    hint: () =>
      'Check the URL: its first label is the tunnel name, as `tunnel2 http` printed it when it started. A random name changes each time the agent starts; use `--subdomain <name>` to keep one.',
  },
  TUNNEL2_ERR_TUNNEL_OFFLINE: {
    title: 'Tunnel offline',
    where: 'agent',
    hint: (wait) =>
      `The agent that serves this URL is not connected to the edge. On the machine that runs it, start it again (\`tunnel2 http <port>\`) and check its output. ${wait}`,
  },
  TUNNEL2_ERR_TUNNEL_PENDING: {
    title: 'Tunnel reconnecting',
    where: 'edge',
    hint: (wait) => `The edge has just restarted and agents are reconnecting. ${wait}`,
  },
  TUNNEL2_ERR_TUNNEL_BUSY: {
    title: 'Tunnel busy',
    where: 'edge',
    hint: (wait) => `This tunnel has as many requests in flight as it may carry. ${wait}`,
  },
  TUNNEL2_ERR_RESPONSE_TIMEOUT: {
    title: 'Tunnel timed out',
    where: 'agent',
    hint: () =>
      'The agent, or the local server behind it, did not answer in time. Check that your local server answers this request, and the output of `tunnel2 http` for errors.',
  },
  TUNNEL2_ERR_STREAM_FAILED: {
    title: 'Tunnel failed',
    where: 'agent',
    hint: (wait) =>
      `The agent dropped the request. ${wait} If it persists, check the output of \`tunnel2 http\`.`,
  },
  TUNNEL2_ERR_HEADERS_TOO_LARGE: checkRequest('Request headers too large'),
  TUNNEL2_ERR_BAD_REQUEST: checkRequest('Bad request'),
  TUNNEL2_ERR_INVALID_NAME: checkRequest('Invalid tunnel name'),
  TUNNEL2_ERR_RESERVED_NAME: checkRequest('Reserved name'),
  TUNNEL2_ERR_NAME_IN_USE: checkRequest('Name in use'),
  TUNNEL2_ERR_UPGRADE_UNSUPPORTED: checkRequest('Upgrade not supported'),
  TUNNEL2_ERR_INVALID_CONFIG: clusterTrouble('Edge misconfigured'),
  TUNNEL2_ERR_INVALID_OPTION: clusterTrouble('Edge misconfigured'),
  TUNNEL2_ERR_DRAINING: {
    title: 'Edge restarting',
    where: 'edge',
    hint: (wait) => `This edge is shutting down for a restart or an update. ${wait}`,
  },
  TUNNEL2_ERR_AGENT_TOKEN_MISSING: checkRequest('Agent token missing'),
  TUNNEL2_ERR_AGENT_TOKEN_INVALID: checkRequest('Agent token invalid'),
  TUNNEL2_ERR_AGENT_TOKEN_EXPIRED: checkRequest('Agent token expired'),
  TUNNEL2_ERR_TOO_MANY_SESSIONS: clusterTrouble('Too many tunnels'),
  TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED: {
    title: 'Sign-in required',
    where: 'edge',
    hint: () =>
      "This tunnel is protected by a user name and password (its agent runs with `--basic-auth`). Ask the tunnel's owner for them and load the page again.",
  },
  TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN: {
    title: 'Address not allowed',
    where: 'edge',
    hint: () =>
      "This tunnel accepts requests from some addresses only (its agent runs with `--allow-ip`). Ask the tunnel's owner to add yours.",
  },
  TUNNEL2_ERR_BODY_TOO_LARGE: {
    title: 'Request body too large',
    where: 'edge',
    hint: () => 'Send a smaller body: the edge refuses bodies above its limit before reading them.',
  },
  TUNNEL2_ERR_RATE_LIMITED: {
    title: 'Too many requests',
    where: 'edge',
    hint: (wait) => `This tunnel gets more requests than its rate limit allows. ${wait}`,
  },
  TUNNEL2_ERR_REQUEST_TIMEOUT: checkRequest('Request timeout'),
  TUNNEL2_ERR_METHOD_NOT_ALLOWED: checkRequest('Method not allowed'),
  TUNNEL2_ERR_HTTP_VERSION: checkRequest('HTTP version not supported'),
  TUNNEL2_ERR_NODE_UNREACHABLE: clusterTrouble('Edge node unreachable'),
  TUNNEL2_ERR_NODE_AUTH_INVALID: checkRequest('Forbidden'),
  TUNNEL2_ERR_NODE_LINK_VERSION: clusterTrouble('Edge link version'),
  TUNNEL2_ERR_NODE_LINK_MISDIRECTED: clusterTrouble('Misdirected request'),
  TUNNEL2_ERR_NODE_LINK_BUSY: clusterTrouble('Edge link busy'),
  TUNNEL2_ERR_REGISTRY_UNAVAILABLE: clusterTrouble('Tunnel registry unavailable'),
  TUNNEL2_ERR_TCP_DISABLED: checkRequest('TCP tunnels disabled'),
  TUNNEL2_ERR_TCP_PORT_UNAVAILABLE: checkRequest('TCP port unavailable'),
  TUNNEL2_ERR_TCP_PORTS_EXHAUSTED: clusterTrouble('TCP ports exhausted'),
  TUNNEL2_ERR_TOO_MANY_TCP_PORTS: clusterTrouble('Too many TCP ports'),
  TUNNEL2_ERR_AGENT_TOO_OLD: {
    title: 'Agent too old for gRPC',
    where: 'agent',
    hint: () =>
      'The agent serving this URL predates HTTP/2 and gRPC: upgrade `@tunnel2/cli` on its machine, then run `tunnel2 http <port> --h2c`.',
  },
};

/** "Retry in 5 seconds." for an answer with Retry-After, else a plain invitation. */
function waitText(retryAfterS: number | undefined): string {
  if (retryAfterS === undefined) return 'Retry shortly.';
  return `Retry in ${retryAfterS} second${retryAfterS === 1 ? '' : 's'}.`;
}

/** The facts of an edge answer for `code`, the message being the plain-text line the edge writes. */
export function edgeErrorFacts(
  code: EdgeErrorCode,
  message: string,
  retryAfterS: number | undefined,
  context: { host?: string | undefined; requestId?: string | undefined },
): ErrorFacts {
  const explanation = explanations[code];
  return {
    status: statusByCode[code],
    title: explanation.title,
    code,
    message,
    where: explanation.where,
    host: context.host,
    hint: explanation.hint(waitText(retryAfterS)),
    requestId: context.requestId,
  };
}
