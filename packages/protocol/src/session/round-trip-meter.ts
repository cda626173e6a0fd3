/** PINGs timed back to back after HELLO before a round trip is reported (the smallest of them). */
const STARTUP_SAMPLES = 3;

/**
 * The PINGs a session sends, and the round trip they measure: one PING is timed at a time (from the
 * enqueue: the batch leaves within the turn, and the wait in our own event loop belongs in a round trip as
 * the streams see it), and `rttMs` is the shortest seen, the path's own delay without the queueing a loaded
 * moment adds, which is what a flow-control window has to cover (with a floor for the event loops'
 * turnaround: receive-window.ts).
 */
export class RoundTripMeter {
  /** Shortest round trip in ms; 0 until the startup samples came back. */
  rttMs = 0;
  /** The latest round trip in ms (0 until one came back): what a status line shows, queueing included. */
  lastMs = 0;
  #counter = 0n;
  #timed: { id: bigint; sentAt: number } | undefined;
  #samples = 0;
  #min = 0;

  /** The 8-byte payload of the next PING; it is timed unless another one still is. */
  nextPing(): Buffer {
    const id = this.#counter++;
    const payload = Buffer.allocUnsafe(8);
    payload.writeBigUInt64BE(id, 0);
    if (this.#timed === undefined) this.#timed = { id, sentAt: performance.now() };
    return payload;
  }

  /**
   * A PING's ACK arrived. True when another startup sample is wanted: the first round trip runs through
   * code the JIT has not seen yet and can take milliseconds on loopback, so a few more follow it at once.
   */
  acked(payload: Buffer): boolean {
    const timed = this.#timed;
    if (timed === undefined || payload.readBigUInt64BE(0) !== timed.id) return false;
    this.#timed = undefined;
    const sample = performance.now() - timed.sentAt;
    this.lastMs = sample;
    this.#min = this.#samples === 0 ? sample : Math.min(this.#min, sample);
    this.#samples++;
    if (this.#samples < STARTUP_SAMPLES) return true;
    this.rttMs = this.#min;
    return false;
  }
}
