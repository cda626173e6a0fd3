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

// The receive path's calls into a stream, each guarded like guardStream's work but in its own `try`: a
// closure per frame (and its context) was collector time per request (issue #34).

/** The session's handler hears of a stream the peer opened. */
export function announceStream(stream: MuxStream, session: SessionHandler): void {
  try {
    session.onStream?.(stream);
  } catch (error) {
    streamFailed(stream, error, session);
  }
}

export function receiveHeaders(
  stream: MuxStream,
  payload: Buffer,
  endStream: boolean,
  session: SessionHandler,
): void {
  try {
    stream.receiveHeaders(payload, endStream);
  } catch (error) {
    streamFailed(stream, error, session);
  }
}

export function receiveData(
  stream: MuxStream,
  payload: Buffer,
  endStream: boolean,
  session: SessionHandler,
): void {
  try {
    stream.receiveData(payload, endStream);
  } catch (error) {
    streamFailed(stream, error, session);
  }
}

export function receiveWindowUpdate(stream: MuxStream, increment: number, session: SessionHandler): void {
  try {
    stream.receiveWindowUpdate(increment);
  } catch (error) {
    streamFailed(stream, error, session);
  }
}

/** What guardStream does with a throw. */
function streamFailed(stream: MuxStream, error: unknown, session: SessionHandler): void {
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
