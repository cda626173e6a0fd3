/**
 * A peer quiet for less than this is taken to be alive when a stream is opened to it; past it, the new
 * stream asks for a sign of life (`Heartbeat.probe`). A second: long enough that a busy session, which
 * hears from its peer all the time, never probes; short enough that a request sent the moment a peer
 * froze is not left to the heartbeat's two intervals.
 */
export const PROBE_QUIET_MS = 1_000;

/** What a heartbeat does, and the local policies it follows (PROTOCOL.md §7). */
export interface HeartbeatOptions {
  /** Sends a PING. */
  ping: () => void;
  /** The peer is gone: it sent nothing for two intervals, or did not answer a probe. */
  silent: (silentForMs: number) => void;
  /** How long a probed peer has to answer; 0: no probes. */
  probeTimeoutMs?: number;
  /**
   * Leave out this side's PING in an interval in which the peer sent one: our ACK already told it we are
   * alive, and its PING told us. Halves an idle session's heartbeat traffic when the peer pings at the
   * same interval. The cost: a side that skips takes no round-trip samples after its startup ones (only
   * its own PINGs are timed), so it is for a side that shows no live round trip (the edge).
   */
  skipWhenPinged?: boolean;
}

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
  readonly #skipWhenPinged: boolean;
  /** The peer sent a PING since the last tick. */
  #pinged = false;
  /** True from the start: the frame that started the heartbeat (the peer's HELLO) was just heard. */
  #heard = true;
  #silentTicks = 0;
  /** When the peer was last heard from (performance clock). */
  #lastHeard = performance.now();
  /** The probe in progress: waiting for the quiet period to pass, or for an answer. */
  #probe: NodeJS.Timeout | undefined;

  constructor(intervalMs: number, options: HeartbeatOptions) {
    this.#ping = options.ping;
    this.#silent = options.silent;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 0;
    this.#skipWhenPinged = options.skipWhenPinged ?? false;
    this.#timer = setInterval(() => {
      if (this.#heard) {
        this.#heard = false;
        this.#silentTicks = 0;
      } else if (++this.#silentTicks >= 2) {
        this.#silent(this.#quietFor());
        return;
      }
      const pinged = this.#pinged;
      this.#pinged = false;
      if (!(pinged && this.#skipWhenPinged)) this.#ping();
    }, intervalMs);
    this.#timer.unref();
  }

  /** The peer sent a PING (it was also heard). */
  pinged(): void {
    this.#pinged = true;
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
    const probe = setTimeout(() => {
      // Timers run before sockets are read: after a stalled event loop the answer may be waiting unread.
      // The verdict comes after this turn's reads (anything heard ends the probe).
      setImmediate(() => {
        if (this.#probe !== probe) return;
        this.#probe = undefined;
        this.#silent(this.#quietFor());
      });
    }, this.#probeTimeoutMs);
    probe.unref();
    this.#probe = probe;
  }

  #quietFor(): number {
    return Math.round(performance.now() - this.#lastHeard);
  }
}

/**
 * The heartbeat two sides agree on: the smaller of their non-zero intervals (PROTOCOL.md §7), or none
 * when both announced 0.
 */
export function agreedHeartbeat(
  localMs: number,
  peerMs: number,
  options: HeartbeatOptions,
): Heartbeat | undefined {
  const interval = Math.min(localMs || Number.POSITIVE_INFINITY, peerMs || Number.POSITIVE_INFINITY);
  if (!Number.isFinite(interval)) return undefined;
  return new Heartbeat(interval, options);
}
