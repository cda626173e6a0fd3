/**
 * The kinds a failed request is counted under. `http_<status>` for every answer that is not expected (2xx
 * unless --expect-status says otherwise), then:
 * - `timeout`: no complete answer within the request timeout;
 * - `reset`: the connection was reset or closed before the answer was complete (ECONNRESET, EPIPE, or the
 *   peer closing mid-response: "response ended prematurely");
 * - `refused`: the connection was refused (ECONNREFUSED): nothing listens there, e.g. the service died;
 * - `other`: any other transport error.
 */
export type ErrorKind = `http_${number}` | TransportErrorKind;
export type TransportErrorKind = 'timeout' | 'reset' | 'refused' | 'other';

const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET']);

/** Maps a transport error to its kind by its stable `code` (never by its message). */
export function transportErrorKind(err: unknown): 'reset' | 'refused' | 'other' {
  const code =
    typeof err === 'object' && err !== null && 'code' in err ? (err as { code: unknown }).code : undefined;
  if (typeof code !== 'string') return 'other';
  if (code === 'ECONNREFUSED') return 'refused';
  return RESET_CODES.has(code) ? 'reset' : 'other';
}

/** Counts what became of every request of one side of one stage. */
export class OutcomeCounter {
  /** Requests written to a socket. */
  sent = 0;
  /** Answers with an expected status (2xx by default). */
  ok = 0;
  /** Requests that ended in an answer (any status) or an error. */
  finished = 0;
  /** Response bytes received (headers and body) on 2xx and non-2xx answers. */
  bytes = 0;
  readonly errors: Partial<Record<ErrorKind, number>> = {};
  private readonly isOk: (status: number) => boolean;

  /** @param isOk which statuses count as success (default: 2xx). */
  constructor(isOk: (status: number) => boolean = (status) => status >= 200 && status < 300) {
    this.isOk = isOk;
  }

  /** Counts an answer; true when its status was expected. */
  response(status: number, bytes: number): boolean {
    this.finished += 1;
    this.bytes += bytes;
    const ok = this.isOk(status);
    if (ok) this.ok += 1;
    else this.fail(`http_${status}`);
    return ok;
  }

  /** `count` requests failed without an answer. */
  failed(kind: TransportErrorKind, count = 1): void {
    this.finished += count;
    this.fail(kind, count);
  }

  errorCount(): number {
    let total = 0;
    for (const n of Object.values(this.errors)) total += n ?? 0;
    return total;
  }

  private fail(kind: ErrorKind, count = 1): void {
    this.errors[kind] = (this.errors[kind] ?? 0) + count;
  }
}
