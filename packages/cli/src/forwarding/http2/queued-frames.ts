/**
 * Frames of a tunnel stream that came while its backend stream was being opened (h2-exchange.ts holds them,
 * in order, and plays them into the backend stream once it exists).
 */
export type Queued = { data: Buffer } | { trailers: Buffer } | { end: true };

/**
 * Whether request trailers may still follow the frames queued so far: yes until the body's end has come,
 * and when it came as a trailer head. A unary gRPC call usually arrives whole (head, DATA, end) before its
 * backend stream is opened; node:http2 told to wait for trailers there would cost a 'wantTrailers' callback
 * and an empty trailer block per call for nothing (issue #32's unary gRPC CPU per call).
 */
export function trailersMayFollow(queued: readonly Queued[]): boolean {
  let ended = false;
  for (const frame of queued) {
    if ('trailers' in frame) return true;
    if ('end' in frame) ended = true;
  }
  return !ended;
}
