import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import type { EntryError } from '../entries/entry.js';
import type { ExchangeRecorder } from './capture.js';

/** RST_STREAM CANCEL (RFC 9113 §7), without loading node:http2 for its constants. */
const H2_CANCEL = 0x8;

/** A head's fields in the order received, without the pseudo-header fields (`:status`). */
function fieldsOf(raw: readonly string[] | undefined, headers: IncomingHttpHeaders): string[] {
  const out: string[] = [];
  if (raw !== undefined) {
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (!raw[i]!.startsWith(':')) out.push(raw[i]!, raw[i + 1]!);
    }
    return out;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [String(value)]) out.push(name, v);
  }
  return out;
}

/**
 * Sends a replay's body on an HTTP/2 stream the agent opened for it (its head already sent: see
 * ReplayTarget.h2Stream) and records the answer: head, body and trailers (a gRPC call's `grpc-status`).
 * Resolves with why it ended early, or undefined when the response ended complete. `signal` cancels the
 * stream (RST_STREAM CANCEL); a target silent for `idleTimeoutMs` ends it too.
 */
export function sendOverH2(
  stream: ClientHttp2Stream,
  body: Buffer,
  recorder: ExchangeRecorder,
  signal: AbortSignal,
  idleTimeoutMs: number,
): Promise<EntryError | undefined> {
  return new Promise((resolve) => {
    /** Why it ended early, when it did: set before the stream is cancelled. */
    let failure: EntryError | undefined;
    let complete = false;
    const stop = (error: EntryError): void => {
      failure ??= error;
      if (!stream.closed) stream.close(H2_CANCEL);
    };
    const onAbort = (): void => stop({ code: 'replay_cancelled', message: 'replay cancelled' });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    stream.setTimeout(idleTimeoutMs, () =>
      stop({
        code: 'replay_timeout',
        message: `the local target sent nothing for ${idleTimeoutMs / 1000} s`,
      }),
    );
    stream.on('response', (headers, _flags, raw?: string[]) => {
      recorder.responseHead(Number(headers[':status']), fieldsOf(raw, headers));
    });
    stream.on('data', (chunk: Buffer) => recorder.responseData(chunk));
    stream.on('trailers', (headers, _flags, raw?: string[]) => {
      recorder.responseTrailers(fieldsOf(raw, headers));
    });
    // node:http2 also ends the readable side of a stream reset with CANCEL: only an end without a reset code
    // is the response's END_STREAM.
    stream.on('end', () => {
      complete = (stream.rstCode ?? 0) === 0;
    });
    stream.on('error', (err) => {
      failure ??= { code: 'replay_failed', message: err.message };
    });
    stream.on('close', () => {
      signal.removeEventListener('abort', onAbort);
      if (complete && failure === undefined) resolve(undefined);
      else resolve(failure ?? { code: 'response_aborted', message: 'the response ended early' });
    });
    stream.end(body);
  });
}
