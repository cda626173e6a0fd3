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
  /** How long the session may receive nothing (no frame, no PING's answer) before a PING goes. */
  intervalMs: number;
  /** How long a PING may go unanswered, with nothing else received either, before the session is given up. */
  timeoutMs: number;
}

/**
 * 310 s between PINGs: just above the 5 min that gRPC servers allow between a client's PINGs by default
 * (grpc-go's and grpc-java's keepalive enforcement: a client that PINGs more often while the server sends
 * nothing gets GOAWAY `too_many_pings` after a few, and that GOAWAY ends every call on the connection, a quiet
 * server-streaming watch included). Envoy sends no upstream PINGs unless configured; a shorter interval would
 * find a dead backend sooner but cut healthy quiet calls to the most common gRPC servers, so the default stays
 * within their policy. PINGs go only on a session that has received nothing for the interval (a busy one
 * needs none). 20 s to answer: grpc-go's keepalive timeout, long enough for a backend in a GC pause or under
 * load (node:http2 answers PINGs without the application). A server with a stricter policy (grpc-go's also
 * objects to PINGs on a session with no call open) still says `too_many_pings`: that retires an idle session
 * (the next request dials anew) and doubles the interval for the pool's next sessions (afterGoaway), as
 * grpc-go's client does; `backendKeepalive` sets both figures, and `false` turns the PINGs off.
 */
export const DEFAULT_KEEPALIVE: Readonly<KeepaliveSettings> = { intervalMs: 310_000, timeoutMs: 20_000 };

/** The code of a session given up because a PING went unanswered (backend-error.ts words it). */
export const PING_TIMEOUT = 'TUNNEL2_ERR_BACKEND_PING_TIMEOUT';

/** The longest wait setTimeout keeps: beyond it Node waits 1 ms instead (every PING would time out at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The settings with their defaults, or false (PINGs off: for a backend whose PING policy closes connections
 * that PING, or one the user knows to be alive); a value that is not a positive number of ms that a timer
 * can wait is a usage error.
 */
export function resolveKeepalive(
  given: Partial<KeepaliveSettings> | false | undefined,
): KeepaliveSettings | false {
  if (given === false) return false;
  const settings = { ...DEFAULT_KEEPALIVE, ...given };
  for (const [name, value] of Object.entries(settings)) {
    if (!Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        `backendKeepalive.${name} must be a positive number of milliseconds, at most ${MAX_TIMER_MS}, got ${String(value)}`,
      );
    }
  }
  return settings;
}

/** RFC 9113's ENHANCE_YOUR_CALM, which grpc-go and grpc-java send with "too_many_pings" to a client that PINGs. */
const ENHANCE_YOUR_CALM = 0xb;

/**
 * The settings for the next sessions after a backend's GOAWAY: the interval doubled when it objected to the
 * PINGs (ENHANCE_YOUR_CALM, debug data `too_many_pings`), as grpc-go's client does, so that a backend with a
 * 5 min PING policy stops closing its connections after a few rounds instead of every minute or two; else
 * the same.
 */
export function afterGoaway(
  settings: KeepaliveSettings,
  code: number,
  debugData: Buffer | undefined,
): KeepaliveSettings {
  if (code !== ENHANCE_YOUR_CALM || debugData?.toString('latin1') !== 'too_many_pings') return settings;
  return { ...settings, intervalMs: Math.min(settings.intervalMs * 2, MAX_TIMER_MS) };
}

/**
 * PINGs `session` when it has received nothing for `intervalMs`, until it closes; a PING unanswered for
 * `timeoutMs`, with nothing else received meanwhile either, calls `dead` with an error coded PING_TIMEOUT (the
 * caller destroys the session with it). Any bytes in count as a sign of life, as grpc-go's client keepalive
 * reads "activity" and Envoy extends its PING timeout on any frame: a busy backend whose PING ACK waits
 * behind seconds of DATA (a slow link, a server that writes its frames in order) is alive, and killing its
 * session would cut every response on it. The socket's byte count is read once per tick, nothing per
 * request. Timers are unref'd: the tunnel's WebSocket keeps the agent alive, not an idle backend session.
 */
export function keepAlive(
  session: ClientHttp2Session,
  settings: KeepaliveSettings,
  dead: (error: Error) => void,
): void {
  let timer: NodeJS.Timeout | undefined;
  /** The socket's bytes read at the last look: more since means the backend is alive. */
  let seen = bytesIn(session);
  const alive = (): boolean => {
    const now = bytesIn(session);
    const more = now !== seen;
    seen = now;
    return more;
  };
  const schedule = (ms: number, then: () => void): void => {
    timer = setTimeout(then, ms);
    timer.unref();
  };
  const waitForAnswer = (): void => {
    if (session.destroyed) return;
    if (alive()) {
      // No ACK yet, but frames came: the ACK is on its way behind them; wait once more.
      schedule(settings.timeoutMs, waitForAnswer);
      return;
    }
    const seconds = settings.timeoutMs / 1000;
    dead(
      Object.assign(new Error(`the backend left a PING unanswered for ${seconds} s`), {
        code: PING_TIMEOUT,
      }),
    );
  };
  const tick = (): void => {
    if (session.destroyed) return;
    if (alive()) {
      schedule(settings.intervalMs, tick);
      return;
    }
    schedule(settings.timeoutMs, waitForAnswer);
    try {
      // The callback also runs, with an error, when the session is destroyed meanwhile: its 'close' has
      // stopped the timer by then.
      session.ping((err) => {
        if (err !== null || session.destroyed) return;
        clearTimeout(timer);
        alive();
        schedule(settings.intervalMs, tick);
      });
    } catch {
      // Destroyed between the check and the PING: nothing to keep alive.
      clearTimeout(timer);
    }
  };
  session.once('close', () => clearTimeout(timer));
  schedule(settings.intervalMs, tick);
}

/** Bytes the session's socket has read (the proxy node:http2 hands out passes bytesRead through). */
function bytesIn(session: ClientHttp2Session): number {
  return session.destroyed ? 0 : (session.socket?.bytesRead ?? 0);
}
