import { AgentError, AgentErrorCode } from '../errors.js';
import type { ExtraTunnelAnswer } from './agent-session.js';
import { type RefusalContext, refusalMessage } from './refusal-message.js';

/**
 * The tunnels the edge refused among those a session listed, as one fatal error naming each and why (the
 * whole start fails: a config file's tunnels come up together or not at all); undefined if none was.
 * `contexts[i]`: where listed tunnel i was asked for (its label, its config file).
 */
export function refusedTunnels(
  answers: readonly ExtraTunnelAnswer[],
  contexts: readonly RefusalContext[],
): AgentError | undefined {
  const refusals: string[] = [];
  let edgeCode: string | undefined;
  for (const [i, answer] of answers.entries()) {
    if (!('error' in answer)) continue;
    edgeCode ??= answer.error.code;
    const context = contexts[i] ?? {};
    refusals.push(
      refusalMessage(
        { edgeCode: answer.error.code, text: answer.error.message },
        { ...context, label: context.label ?? String(i + 1) },
      ),
    );
  }
  if (refusals.length === 0) return undefined;
  return new AgentError(AgentErrorCode.TUNNEL_REFUSED, refusals.join('; '), { edgeCode, fatal: true });
}
