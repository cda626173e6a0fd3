/** Stable error codes of the edge. The HTTP status each maps to lives here, in one place. */
export const EdgeErrorCode = {
  UNKNOWN_SESSION: 'TUNNEL2_ERR_UNKNOWN_SESSION',
  TUNNEL_OFFLINE: 'TUNNEL2_ERR_TUNNEL_OFFLINE',
  /**
   * A well-formed name no agent holds, asked for just after the edge started (`startupGraceMs`): its agent
   * may be reconnecting to the restarted edge, so not a 404 that tells a client the URL is gone.
   */
  TUNNEL_PENDING: 'TUNNEL2_ERR_TUNNEL_PENDING',
  TUNNEL_BUSY: 'TUNNEL2_ERR_TUNNEL_BUSY',
  RESPONSE_TIMEOUT: 'TUNNEL2_ERR_RESPONSE_TIMEOUT',
  STREAM_FAILED: 'TUNNEL2_ERR_STREAM_FAILED',
  HEADERS_TOO_LARGE: 'TUNNEL2_ERR_HEADERS_TOO_LARGE',
  BAD_REQUEST: 'TUNNEL2_ERR_BAD_REQUEST',
  INVALID_NAME: 'TUNNEL2_ERR_INVALID_NAME',
  RESERVED_NAME: 'TUNNEL2_ERR_RESERVED_NAME',
  NAME_IN_USE: 'TUNNEL2_ERR_NAME_IN_USE',
  UPGRADE_UNSUPPORTED: 'TUNNEL2_ERR_UPGRADE_UNSUPPORTED',
  INVALID_CONFIG: 'TUNNEL2_ERR_INVALID_CONFIG',
  /**
   * `tunnel2 server` / `tunnel2-edge` given a command line it cannot take (an unknown flag, a flag without
   * its value, an argument): a usage error, exit 2. The CLI's agent commands use the same code.
   */
  INVALID_OPTION: 'TUNNEL2_ERR_INVALID_OPTION',
  DRAINING: 'TUNNEL2_ERR_DRAINING',
  AGENT_TOKEN_MISSING: 'TUNNEL2_ERR_AGENT_TOKEN_MISSING',
  AGENT_TOKEN_INVALID: 'TUNNEL2_ERR_AGENT_TOKEN_INVALID',
  AGENT_TOKEN_EXPIRED: 'TUNNEL2_ERR_AGENT_TOKEN_EXPIRED',
  TOO_MANY_SESSIONS: 'TUNNEL2_ERR_TOO_MANY_SESSIONS',
  PUBLIC_AUTH_REQUIRED: 'TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED',
  PUBLIC_IP_FORBIDDEN: 'TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN',
  BODY_TOO_LARGE: 'TUNNEL2_ERR_BODY_TOO_LARGE',
  RATE_LIMITED: 'TUNNEL2_ERR_RATE_LIMITED',
  REQUEST_TIMEOUT: 'TUNNEL2_ERR_REQUEST_TIMEOUT',
  METHOD_NOT_ALLOWED: 'TUNNEL2_ERR_METHOD_NOT_ALLOWED',
  HTTP_VERSION: 'TUNNEL2_ERR_HTTP_VERSION',
  /** The node holding the session could not be reached (refused, timed out, gone). */
  NODE_UNREACHABLE: 'TUNNEL2_ERR_NODE_UNREACHABLE',
  /** A request claimed to come from another node but its signature did not verify. */
  NODE_AUTH_INVALID: 'TUNNEL2_ERR_NODE_AUTH_INVALID',
  /** A peer node opened a link with the handshake of an older version (v1): it uses the HTTP hop instead. */
  NODE_LINK_VERSION: 'TUNNEL2_ERR_NODE_LINK_VERSION',
  /**
   * A genuine link upgrade signed for another node id than this node's: the peer's registry still names the
   * node that was at this address before (this node restarted with a new id). Not a forgery: the peer asks
   * the registry again rather than falling back to the HTTP hop.
   */
  NODE_LINK_MISDIRECTED: 'TUNNEL2_ERR_NODE_LINK_MISDIRECTED',
  /** This node remembers its most link nonces already (links opened faster than ever legitimately): retry. */
  NODE_LINK_BUSY: 'TUNNEL2_ERR_NODE_LINK_BUSY',
  /** The shared session registry (Redis) does not answer: no new claims, no owner lookups. */
  REGISTRY_UNAVAILABLE: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE',
  /** An agent asked for a TCP tunnel from an edge without a TCP port range (`--tcp-ports`). */
  TCP_DISABLED: 'TUNNEL2_ERR_TCP_DISABLED',
  /** The TCP port asked for is outside the range, held by another agent, or taken on the host. */
  TCP_PORT_UNAVAILABLE: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE',
  /** Every port of the TCP range is in use. */
  TCP_PORTS_EXHAUSTED: 'TUNNEL2_ERR_TCP_PORTS_EXHAUSTED',
  /** The token (an anonymous agent: its address) holds its limit of TCP ports in use (maxTcpPortsPerOwner). */
  TOO_MANY_TCP_PORTS: 'TUNNEL2_ERR_TOO_MANY_TCP_PORTS',
  /**
   * A gRPC request for a session whose agent did not say `http2` in its HELLO: it would reach the backend
   * as HTTP/1.1, without its trailers. Answered in the gRPC form, status 12 UNIMPLEMENTED.
   */
  AGENT_TOO_OLD: 'TUNNEL2_ERR_AGENT_TOO_OLD',
} as const;
export type EdgeErrorCode = (typeof EdgeErrorCode)[keyof typeof EdgeErrorCode];

export const statusByCode: Readonly<Record<EdgeErrorCode, number>> = {
  TUNNEL2_ERR_UNKNOWN_SESSION: 404,
  TUNNEL2_ERR_TUNNEL_OFFLINE: 502,
  TUNNEL2_ERR_TUNNEL_PENDING: 503,
  TUNNEL2_ERR_TUNNEL_BUSY: 503,
  TUNNEL2_ERR_RESPONSE_TIMEOUT: 504,
  TUNNEL2_ERR_STREAM_FAILED: 502,
  TUNNEL2_ERR_HEADERS_TOO_LARGE: 431,
  TUNNEL2_ERR_BAD_REQUEST: 400,
  TUNNEL2_ERR_INVALID_NAME: 400,
  TUNNEL2_ERR_RESERVED_NAME: 403,
  TUNNEL2_ERR_NAME_IN_USE: 409,
  TUNNEL2_ERR_UPGRADE_UNSUPPORTED: 501,
  TUNNEL2_ERR_INVALID_CONFIG: 500,
  // Never an HTTP answer (a command-line error); the table covers every code.
  TUNNEL2_ERR_INVALID_OPTION: 500,
  TUNNEL2_ERR_DRAINING: 503,
  TUNNEL2_ERR_AGENT_TOKEN_MISSING: 401,
  TUNNEL2_ERR_AGENT_TOKEN_INVALID: 401,
  TUNNEL2_ERR_AGENT_TOKEN_EXPIRED: 401,
  TUNNEL2_ERR_TOO_MANY_SESSIONS: 429,
  TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED: 401,
  TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN: 403,
  TUNNEL2_ERR_BODY_TOO_LARGE: 413,
  TUNNEL2_ERR_RATE_LIMITED: 429,
  TUNNEL2_ERR_REQUEST_TIMEOUT: 408,
  TUNNEL2_ERR_METHOD_NOT_ALLOWED: 405,
  TUNNEL2_ERR_HTTP_VERSION: 505,
  TUNNEL2_ERR_NODE_UNREACHABLE: 502,
  TUNNEL2_ERR_NODE_AUTH_INVALID: 403,
  // 426 Upgrade Required: what a node from before links also takes as "no link here, use the HTTP hop".
  TUNNEL2_ERR_NODE_LINK_VERSION: 426,
  TUNNEL2_ERR_NODE_LINK_BUSY: 503,
  // 421 Misdirected Request (RFC 9110 §15.5.20): this server is not the one the request was meant for.
  TUNNEL2_ERR_NODE_LINK_MISDIRECTED: 421,
  TUNNEL2_ERR_REGISTRY_UNAVAILABLE: 503,
  TUNNEL2_ERR_TCP_DISABLED: 404,
  TUNNEL2_ERR_TCP_PORT_UNAVAILABLE: 409,
  TUNNEL2_ERR_TCP_PORTS_EXHAUSTED: 503,
  TUNNEL2_ERR_TOO_MANY_TCP_PORTS: 429,
  TUNNEL2_ERR_AGENT_TOO_OLD: 501,
};

export class EdgeError extends Error {
  readonly code: EdgeErrorCode;
  readonly statusCode: number;
  constructor(code: EdgeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.statusCode = statusByCode[code];
    this.name = 'EdgeError';
  }
}
