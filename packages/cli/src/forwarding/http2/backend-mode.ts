import { AgentError, AgentErrorCode } from '../../errors.js';
import type { BackendMode } from './h2-backend.js';

/**
 * Which HTTP the agent speaks to its backend, from the target and `--h2c` / `--http1` (or the config
 * file's `h2c` / `http1`): HTTP/2 with prior knowledge (h2c), ALPN for an https:// target (h2 when the
 * backend offers it), or undefined for HTTP/1.1 only. Contradictions are usage errors, said at once.
 */
export function resolveBackendMode(
  origin: string,
  options: { h2c?: boolean | undefined; http1?: boolean | undefined },
): BackendMode | undefined {
  const https = origin.startsWith('https:');
  if (options.h2c === true && options.http1 === true) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      '--h2c and --http1 contradict each other: --h2c speaks HTTP/2 to the backend, --http1 HTTP/1.1 only',
    );
  }
  if (options.h2c === true && https) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      '--h2c is HTTP/2 over plain TCP: an https:// target gets h2 by ALPN when it offers it (drop --h2c)',
    );
  }
  if (options.h2c === true) return 'h2c';
  if (https && options.http1 !== true) return 'alpn';
  return undefined;
}
