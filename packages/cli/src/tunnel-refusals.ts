import type { ExtraTunnelAnswer } from './agent-session.js';
import { AgentError, AgentErrorCode } from './errors.js';

/**
 * The tunnels the edge refused among those a session listed, as one fatal error naming each and why (the
 * whole start fails: a config file's tunnels come up together or not at all); undefined if none was.
 */
export function refusedTunnels(
  answers: readonly ExtraTunnelAnswer[],
  labels: readonly (string | undefined)[],
): AgentError | undefined {
  const refusals: string[] = [];
  let edgeCode: string | undefined;
  for (const [i, answer] of answers.entries()) {
    if (!('error' in answer)) continue;
    edgeCode ??= answer.error.code;
    refusals.push(`tunnel ${labels[i] ?? i + 1}: ${answer.error.message} (${answer.error.code})`);
  }
  if (refusals.length === 0) return undefined;
  return new AgentError(AgentErrorCode.TUNNEL_REFUSED, refusals.join('; '), { edgeCode, fatal: true });
}

/** A refusal of a session's own tunnel, named after it (`label`) when the session carries several. */
export function namedRefusal(label: string | undefined, error: AgentError): AgentError {
  if (label === undefined || error.code !== AgentErrorCode.EDGE_REFUSED) return error;
  return new AgentError(error.code, `tunnel ${label}: ${error.message}`, {
    cause: error,
    status: error.status,
    edgeCode: error.edgeCode,
    fatal: error.fatal,
  });
}
