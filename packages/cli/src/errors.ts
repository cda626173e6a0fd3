/** Stable error codes of the agent / CLI. */
export const AgentErrorCode = {
  INVALID_TARGET: 'TUNNEL2_ERR_INVALID_TARGET',
  INVALID_OPTION: 'TUNNEL2_ERR_INVALID_OPTION',
  EDGE_REFUSED: 'TUNNEL2_ERR_EDGE_REFUSED',
  EDGE_UNREACHABLE: 'TUNNEL2_ERR_EDGE_UNREACHABLE',
  HANDSHAKE_FAILED: 'TUNNEL2_ERR_HANDSHAKE_FAILED',
  CLOSED: 'TUNNEL2_ERR_CLOSED',
  REPLACED: 'TUNNEL2_ERR_REPLACED',
  /** The edge drained this session (GOAWAY GOING_AWAY, then close): not a failure, reconnect at once. */
  EDGE_GOING_AWAY: 'TUNNEL2_ERR_EDGE_GOING_AWAY',
  /** The request inspector could not start (its address is taken or not local). */
  INSPECTOR_FAILED: 'TUNNEL2_ERR_INSPECTOR_FAILED',
  /** The edge answered a TCP tunnel request with an HTTP tunnel: it predates TCP tunnels. */
  TCP_UNSUPPORTED: 'TUNNEL2_ERR_TCP_UNSUPPORTED',
  /** The agent and the edge share no protocol version (both are named): one of them needs upgrading. */
  VERSION_MISMATCH: 'TUNNEL2_ERR_VERSION_MISMATCH',
  /** Several tunnels were asked of an edge that carries one per session: it predates them. */
  MULTI_UNSUPPORTED: 'TUNNEL2_ERR_MULTI_UNSUPPORTED',
  /** `--replica` was asked of an edge that does not join agents as replicas: it predates them. */
  REPLICAS_UNSUPPORTED: 'TUNNEL2_ERR_REPLICAS_UNSUPPORTED',
  /** The edge refused one of the tunnels of a session (the message names it and says why). */
  TUNNEL_REFUSED: 'TUNNEL2_ERR_TUNNEL_REFUSED',
  /** The tunnel config file (tunnel2.yml) is missing, unreadable or invalid. */
  INVALID_CONFIG: 'TUNNEL2_ERR_INVALID_CONFIG',
} as const;
export type AgentErrorCode = (typeof AgentErrorCode)[keyof typeof AgentErrorCode];

/** The codes of errors in what the user typed: each is fatal, and the CLI exits 2 for it. */
export const USAGE_ERRORS: ReadonlySet<AgentErrorCode> = new Set([
  AgentErrorCode.INVALID_TARGET,
  AgentErrorCode.INVALID_OPTION,
  AgentErrorCode.INVALID_CONFIG,
]);

export class AgentError extends Error {
  readonly code: AgentErrorCode;
  /** HTTP status of the edge's refusal, when there was one. */
  readonly status: number | undefined;
  /** The edge's own error code (`x-tunnel2-error`), when it sent one. */
  readonly edgeCode: string | undefined;
  /** Retrying cannot help (bad name, name taken, bad token): the agent stops. */
  readonly fatal: boolean;
  constructor(
    code: AgentErrorCode,
    message: string,
    options: { cause?: unknown; status?: number; edgeCode?: string; fatal?: boolean } = {},
  ) {
    super(message, { cause: options.cause });
    this.code = code;
    this.status = options.status;
    this.edgeCode = options.edgeCode;
    // A usage error (a target, flag or config file as typed) can never succeed by retrying.
    this.fatal = options.fatal ?? USAGE_ERRORS.has(code);
    this.name = 'AgentError';
  }
}
