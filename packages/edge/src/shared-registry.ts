import type { SessionRegistry } from '@tunnel2/registry';
import { EdgeError, EdgeErrorCode } from './errors.js';

/**
 * Connects the registry several edge nodes share (`--registry redis://...`). Loaded only in that mode: a
 * single node, and the agent's bundle, never load ioredis. A Redis that cannot be reached refuses the start
 * with one line naming the setting, the address (password redacted) and why.
 */
export async function openSharedRegistry(url: string, shownUrl: string): Promise<SessionRegistry> {
  const { createRedisRegistry } = await import('@tunnel2/registry/redis');
  try {
    return await createRedisRegistry({ url });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid setting registry=${shownUrl}: cannot use the session registry (${why})`,
      { cause: err },
    );
  }
}
