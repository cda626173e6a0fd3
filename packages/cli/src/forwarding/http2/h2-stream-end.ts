import type { ClientHttp2Stream } from 'node:http2';
import { H2_CANCEL, H2_NO_ERROR, H2_REFUSED_STREAM, isStreamError } from './h2-fields.js';

/**
 * What the close of a backend stream that did not end complete means for the tunnel stream (PROTOCOL.md
 * "HTTP/2 and gRPC", resets), read from its RST_STREAM code and error alone: pure, the exchange acts on it.
 * (A REFUSED_STREAM before any answer was never processed, RFC 9113 §8.7: the exchange first tries the
 * request again, and reads this only when it may not.)
 * - `answer`: the backend reset the stream before its head with a code of failure: the agent answers.
 * - `reset`: the backend reset it (CANCEL, REFUSED_STREAM, or anything once the head went): the client sees
 *   the same kind of reset.
 * - `lost`: no reset code (the connection went, or its error is not a reset): before the head, a replay or
 *   the agent's answer; after it, the response is cut.
 */
export type StreamEnd = 'answer' | 'reset' | 'lost';

export function streamEndOf(
  rstCode: number,
  failure: Error | undefined,
  responseStarted: boolean,
): StreamEnd {
  if (rstCode !== H2_NO_ERROR && (failure === undefined || isStreamError(failure))) {
    if (!responseStarted && rstCode !== H2_CANCEL && rstCode !== H2_REFUSED_STREAM) return 'answer';
    return 'reset';
  }
  return 'lost';
}

/**
 * The backend stream's reset code as the exchange reads it when the stream closed. A stream closed because
 * its whole session went (the backend closed the connection, or its GOAWAY left this stream unprocessed)
 * carries a CANCEL code of node's own: that is a lost connection, not the backend resetting this one
 * stream. REFUSED_STREAM stays itself even then: nghttp2 closes so the streams a GOAWAY left unprocessed.
 */
export function closeCodeOf(h2: ClientHttp2Stream, session: ClientHttp2Stream['session']): number {
  const lost = session === undefined || session.destroyed || session.closed;
  const rstCode = h2.rstCode ?? H2_NO_ERROR;
  return lost && rstCode !== H2_REFUSED_STREAM ? H2_NO_ERROR : rstCode;
}
