import { ErrorCode, errorCodeName } from '../constants.js';
import { ProtocolError, ProtocolErrorCode, StreamResetError } from '../errors.js';
import type { SessionHandler } from './mux-session-options.js';
import type { MuxStream } from './mux-stream.js';

/**
 * Runs per-stream work for the session; a stream-level failure resets only that stream. A flow-control
 * violation is the session's (it is rethrown and ends the session); any other ProtocolError resets the
 * stream with its own wire code; anything else is a handler bug, reset with INTERNAL_ERROR and reported.
 */
export function guardStream(stream: MuxStream, work: () => void, session: SessionHandler): void {
  try {
    work();
  } catch (error) {
    streamFailed(stream, error, session);
  }
}

/**
 * What guardStream does with a throw, for callers on the receive path that run their work in their own
 * `try` (a closure per frame there was collector time per request: issue #34).
 */
export function streamFailed(stream: MuxStream, error: unknown, session: SessionHandler): void {
  if (error instanceof ProtocolError && error.code !== ProtocolErrorCode.FLOW_CONTROL) {
    resetOnError(stream, error.protocolCode, session);
    return;
  }
  if (error instanceof ProtocolError) throw error;
  resetOnError(stream, ErrorCode.INTERNAL_ERROR, session);
  session.onStreamError?.(stream, error);
}

/**
 * Resets a stream on the session's own initiative. Its handler hears it as a reset: otherwise the owner
 * would wait forever for a stream that is gone (a public response left open, a backend request running).
 */
function resetOnError(stream: MuxStream, code: number, session: SessionHandler): void {
  if (stream.closed) return;
  stream.reset(code);
  try {
    stream.handler?.onReset(new StreamResetError(code, `stream reset by this side: ${errorCodeName(code)}`));
  } catch (error) {
    session.onStreamError?.(stream, error);
  }
}
