/** Stable error codes of the bench kit. Branch on these, never on messages. */
export const BenchErrorCode = {
  /** A flag is missing, unknown or out of range (exit code 2). */
  USAGE: 'TUNNEL2_ERR_BENCH_USAGE',
  /** The backend, the edge or the agent did not start (or died) (exit code 3). */
  STACK: 'TUNNEL2_ERR_BENCH_STACK',
  /** The installed autocannon does not have the client internals the pacing relies on (exit code 3). */
  LOAD_GENERATOR: 'TUNNEL2_ERR_BENCH_LOAD_GENERATOR',
  /**
   * The check before the run failed: a side is unreachable, too slow, or answers a status other than
   * --expect-status (exit code 3).
   */
  PREFLIGHT: 'TUNNEL2_ERR_BENCH_PREFLIGHT',
  /** A bulk transfer failed: an answer other than 200, a wrong length, or a connection closed early. */
  TRANSFER: 'TUNNEL2_ERR_BENCH_TRANSFER',
  /**
   * `compare`: a report is missing, unreadable or not a report.json, has a schema version the kit does not
   * know, or the two reports are of different scenarios (exit code 2).
   */
  REPORT_INPUT: 'TUNNEL2_ERR_BENCH_REPORT_INPUT',
  /** `compare --out <dir>`: the folder or a file in it cannot be written (exit code 2). */
  REPORT_OUTPUT: 'TUNNEL2_ERR_BENCH_REPORT_OUTPUT',
} as const;
export type BenchErrorCode = (typeof BenchErrorCode)[keyof typeof BenchErrorCode];

// The global brand shared with @tunnel2/protocol's Tunnel2Error, without depending on that package.
const brand = Symbol.for('tunnel2.error');

/** Every error the bench kit throws on purpose: a stable `code` and an optional `cause`. */
export class BenchError extends Error {
  readonly code: BenchErrorCode;
  constructor(code: BenchErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
Object.defineProperty(BenchError.prototype, brand, { value: true });

export function usageError(message: string): BenchError {
  return new BenchError(BenchErrorCode.USAGE, message);
}
