import type { Inspector } from '@tunnel2/inspector';
import { AgentError, AgentErrorCode } from '../errors.js';
import { forwardHeaders } from '../forwarding/forward-exchange.js';
import type { HostHeaderMode } from '../forwarding/forward-options.js';
import type { H2Backend } from '../forwarding/http2/h2-backend.js';
import { h2ReplayStream } from '../forwarding/http2/h2-replay.js';
import type { Target } from '../forwarding/target.js';
import { httpsOptions } from '../forwarding/target-tls.js';
import { VERSION } from '../version.js';
import type { InspectOptions } from './connect-options.js';

/**
 * A tunnel's request inspector, started where `--inspect` says. Its replays reach the target as the agent's
 * own requests do (over HTTP/2 on the agent's own sessions when the backend has an `h2` side and the
 * target speaks it); a port it cannot take is a fatal AgentError (`INSPECTOR_FAILED`).
 */
export async function startInspector(
  inspect: InspectOptions,
  target: Target,
  hostHeader: HostHeaderMode,
  backend: { h2?: H2Backend | undefined } | { tcp: unknown },
): Promise<Inspector> {
  const h2 = 'h2' in backend ? backend.h2 : undefined;
  // Loaded only when on: the agent without an inspector carries none of it.
  const { createInspector, InspectorError } = await import('@tunnel2/inspector');
  try {
    return await createInspector({
      target: {
        origin: target.origin,
        basePath: target.basePath,
        // A replay reaches the target with the head the agent would have sent it (Host as --host-header says).
        forwardHeaders: (raw) => forwardHeaders(raw, target, hostHeader),
        tlsOptions: (forwarded) => (target.tls ? httpsOptions(target.tls, forwarded) : {}),
        ...(h2 === undefined ? {} : { h2Stream: h2ReplayStream(h2, target) }),
      },
      host: inspect.host,
      port: inspect.port,
      bodyLimit: inspect.bodyLimit,
      budget: inspect.budget,
      version: VERSION,
    });
  } catch (err) {
    if (!(err instanceof InspectorError)) throw err;
    throw new AgentError(AgentErrorCode.INSPECTOR_FAILED, err.message, { cause: err, fatal: true });
  }
}
