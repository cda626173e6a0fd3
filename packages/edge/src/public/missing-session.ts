import { isValidSessionName } from '../agents/session-name.js';
import type { SessionTable } from '../agents/session-table.js';
import { quoteForEcho } from '../answers/echo.js';
import { offline, type Refusal, registryUnavailable, unknownSession } from '../answers/refusals.js';
import { EdgeErrorCode } from '../errors.js';

/** The name has no live agent on this node: unknown, invalid, reserved for a reconnecting agent, or unknowable. */
export async function missingSession(name: string, sessions: SessionTable): Promise<Refusal> {
  if (!isValidSessionName(name)) {
    return {
      code: EdgeErrorCode.UNKNOWN_SESSION,
      message: `no tunnel named ${quoteForEcho(name)}: not a valid session name`,
    };
  }
  try {
    const record = await sessions.lookup(name);
    if (record !== undefined) {
      return offline(name);
    }
  } catch {
    // A registry that cannot answer must not turn into a misleading 404, nor wait for an agent that may
    // well be connected to another node: a prompt 503 with its own code.
    return registryUnavailable(name);
  }
  return unknownSession(name);
}
