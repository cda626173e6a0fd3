import type { ResponseFraming } from './response-framing.js';

/** Why body bytes with no final head before them are refused (they would go out as the answer itself). */
export const BODY_BEFORE_HEAD = 'body bytes before a final response head';

/**
 * Where a chunk of the backend's body went: `taken` by the client (its credit may go back to the stream
 * now), `buffered` in the client's full buffer (credit waits for its 'drain'), or `overran` the length the
 * head declared: what fit was written and the caller cuts the client off, since the bytes beyond would be
 * read as the next response on the connection.
 */
export type BodyChunkOutcome = 'taken' | 'buffered' | 'overran';

/**
 * Writes one body chunk to the client within `framing`'s declared length. Shared by the plain exchange
 * and both upgrade tunnels (a refusal's body), whose clients differ only in what `write` is.
 */
export function writeBodyChunk(
  client: { write(chunk: Buffer): boolean },
  chunk: Buffer,
  framing: ResponseFraming,
): BodyChunkOutcome {
  const fit = framing.fit(chunk.length);
  if (fit < chunk.length) {
    if (fit > 0) client.write(chunk.subarray(0, fit));
    return 'overran';
  }
  return client.write(chunk) ? 'taken' : 'buffered';
}
