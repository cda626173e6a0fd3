import type { ClientHttp2Session } from 'node:http2';
import { AgentError, AgentErrorCode } from '../../errors.js';

/**
 * Keep-alive PINGs on a pooled HTTP/2 session to the backend, as Envoy's `connection_keepalive` and
 * grpc-go's client keepalive send them: a backend that stops answering (its process stopped or wedged, a
 * host gone without a RST, a middlebox that dropped the flow) leaves the TCP connection looking open, and
 * without a PING every stream on it, and every new one the pool hands it, would wait for good. A PING not
 * answered in time gives the session up: its streams fail as a backend failure (a gRPC call sees
 * UNAVAILABLE) and the next request dials a new session.
 */
export interface KeepaliveSettings {
  /** How long after the session's SETTINGS, or after the last PING's answer, the next PING goes. */
  intervalMs: number;
  /** How long a PING may go unanswered before the session is given up. */
  timeoutMs: number;
}

/**
 * 30 s between PINGs: Envoy's commonly configured interval and below the idle timeouts of NATs, conntrack and
 * cloud load balancers (60-350 s), so the PING also keeps such a middlebox from forgetting the flow; one PING
 * per session per 30 s costs nothing. 20 s to answer: grpc-go's keepalive timeout, long enough for a
 * backend in a GC pause or under load (node:http2 answers PINGs without the application), short enough that
 * a request to a dead backend fails within a minute rather than never. PINGs go whether or not streams are
 * open, as Envoy's do: a gRPC server that polices PINGs (grpc-go's default allows none without calls) may
 * then say GOAWAY to an idle session, which only retires it; the next request dials anew.
 */
export const DEFAULT_KEEPALIVE: Readonly<KeepaliveSettings> = { intervalMs: 30_000, timeoutMs: 20_000 };

/** The code of a session given up because a PING went unanswered (backend-error.ts words it). */
export const PING_TIMEOUT = 'TUNNEL2_ERR_BACKEND_PING_TIMEOUT';

/** The settings with their defaults; a value that is not a positive number of ms is a usage error. */
export function resolveKeepalive(given: Partial<KeepaliveSettings> | undefined): KeepaliveSettings {
  const settings = { ...DEFAULT_KEEPALIVE, ...given };
  for (const [name, value] of Object.entries(settings)) {
    if (!Number.isFinite(value) || value <= 0) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        `backendKeepalive.${name} must be a positive number of milliseconds, got ${String(value)}`,
      );
    }
  }
  return settings;
}

/**
 * PINGs `session` every `intervalMs` until it closes; a PING unanswered for `timeoutMs` calls `dead` with an
 * error coded PING_TIMEOUT (the caller destroys the session with it). Timers are unref'd: the tunnel's
 * WebSocket keeps the agent alive, not an idle backend session.
 */
export function keepAlive(
  session: ClientHttp2Session,
  settings: KeepaliveSettings,
  dead: (error: Error) => void,
): void {
  let timer: NodeJS.Timeout | undefined;
  const schedule = (ms: number, then: () => void): void => {
    timer = setTimeout(then, ms);
    timer.unref();
  };
  const ping = (): void => {
    if (session.destroyed) return;
    schedule(settings.timeoutMs, () => {
      const seconds = settings.timeoutMs / 1000;
      dead(
        Object.assign(new Error(`the backend left a PING unanswered for ${seconds} s`), {
          code: PING_TIMEOUT,
        }),
      );
    });
    try {
      // The callback also runs, with an error, when the session is destroyed meanwhile: its 'close' has
      // stopped the timer by then.
      session.ping((err) => {
        if (err !== null) return;
        clearTimeout(timer);
        schedule(settings.intervalMs, ping);
      });
    } catch {
      // Destroyed between the check and the PING: nothing to keep alive.
      clearTimeout(timer);
    }
  };
  session.once('close', () => clearTimeout(timer));
  schedule(settings.intervalMs, ping);
}
