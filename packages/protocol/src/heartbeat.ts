/**
 * A peer quiet for less than this is taken to be alive when a stream is opened to it; past it, the new
 * stream asks for a sign of life (`Heartbeat.probe`). A second: long enough that a busy session, which
 * hears from its peer all the time, never probes; short enough that a request sent the moment a peer
 * froze is not left to the heartbeat's two intervals.
 */
export const PROBE_QUIET_MS = 1_000;

/**
 * Liveness by silence: at every interval, a peer heard from since the last tick is alive and is pinged;
 * two silent intervals in a row mean it is gone. One unref'd timer per session.
 *
 * And liveness on demand (`probe`, local policy, off when `probeTimeoutMs` is 0): a stream opened to a
 * peer quiet for PROBE_QUIET_MS sends a PING at once, and a peer that says nothing within
 * `probeTimeoutMs` is gone, as HTTP/2 servers check a connection before trusting a request to it. A
 * frozen agent then fails the request that finds it in seconds instead of at the heartbeat's verdict.
 * At most one probe per session is outstanding (one more timer); anything heard ends it.
 */
export class Heartbeat {
  readonly #timer: NodeJS.Timeout;
  readonly #ping: () => void;
  readonly #silent: (silentForMs: number) => void;
  readonly #probeTimeoutMs: number;
  /** True from the start: the frame that started the heartbeat (the peer's HELLO) was just heard. */
  #heard = true;
  #silentTicks = 0;
  /** When the peer was last heard from (performance clock). */
  #lastHeard = performance.now();
  /** The probe in progress: waiting for the quiet period to pass, or for an answer. */
  #probe: NodeJS.Timeout | undefined;

  constructor(
    intervalMs: number,
    ping: () => void,
    silent: (silentForMs: number) => void,
    probeTimeoutMs = 0,
  ) {
    this.#ping = ping;
    this.#silent = silent;
    this.#probeTimeoutMs = probeTimeoutMs;
    this.#timer = setInterval(() => {
      if (this.#heard) {
        this.#heard = false;
        this.#silentTicks = 0;
      } else if (++this.#silentTicks >= 2) {
        this.#silent(this.#quietFor());
        return;
      }
      ping();
    }, intervalMs);
    this.#timer.unref();
  }

  /** Something arrived from the peer. */
  heard(): void {
    this.#heard = true;
    this.#lastHeard = performance.now();
    if (this.#probe !== undefined) {
      clearTimeout(this.#probe);
      this.#probe = undefined;
    }
  }

  /**
   * A stream was opened to the peer: unless it was heard from within PROBE_QUIET_MS (or a probe is under
   * way), ask it for a sign of life — now, or once it has been quiet that long — and declare it gone if
   * none comes within `probeTimeoutMs`.
   */
  probe(): void {
    if (this.#probeTimeoutMs === 0 || this.#probe !== undefined) return;
    const quietFor = this.#quietFor();
    if (quietFor >= PROBE_QUIET_MS) {
      this.#ask();
      return;
    }
    this.#probe = setTimeout(() => this.#ask(), PROBE_QUIET_MS - quietFor);
    this.#probe.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    if (this.#probe !== undefined) clearTimeout(this.#probe);
    this.#probe = undefined;
  }

  #ask(): void {
    this.#ping();
    this.#probe = setTimeout(() => {
      this.#probe = undefined;
      this.#silent(this.#quietFor());
    }, this.#probeTimeoutMs);
    this.#probe.unref();
  }

  #quietFor(): number {
    return Math.round(performance.now() - this.#lastHeard);
  }
}

/**
 * The heartbeat two sides agree on: the smaller of their non-zero intervals (PROTOCOL.md §7), or none
 * when both announced 0. `silent` hears a peer that sent nothing for two intervals, or that did not answer
 * a probe within `probeTimeoutMs` (a local policy, 0: no probes).
 */
export function agreedHeartbeat(
  localMs: number,
  peerMs: number,
  ping: () => void,
  silent: (silentForMs: number) => void,
  probeTimeoutMs = 0,
): Heartbeat | undefined {
  const interval = Math.min(localMs || Number.POSITIVE_INFINITY, peerMs || Number.POSITIVE_INFINITY);
  if (!Number.isFinite(interval)) return undefined;
  return new Heartbeat(interval, ping, silent, probeTimeoutMs);
}
