/**
 * When the agent may send a request to the backend a second time. A pooled keep-alive connection can be
 * closed by the backend at the very moment a request goes out on it; the request then fails without a
 * byte of response. RFC 9110 §9.2.2 allows replaying it only if it is idempotent — and only if it carried
 * no body, since a streamed body cannot be sent twice. A POST is never replayed: the client gets the 502.
 */
const replayable: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

export function isReplayable(method: string, hasBody: boolean): boolean {
  return !hasBody && replayable.has(method);
}

/**
 * An HTTP/2 backend stream lost before any answer: `unprocessed` when the backend said it never processed
 * it (REFUSED_STREAM, or beyond its GOAWAY's last stream: RFC 9113 §8.7), and then any bodiless method may
 * go again; otherwise only as isReplayable() says, and not after the backend's own reset of the stream.
 * Never a gRPC call (its body already went to the backend stream, and a call may have had effects).
 */
export function isH2Replayable(
  request: { method: string; hasBody: boolean; grpc: boolean },
  unprocessed: boolean,
  streamReset: boolean,
): boolean {
  if (request.grpc || request.hasBody) return false;
  return unprocessed || (isReplayable(request.method, false) && !streamReset);
}

/** undici's codes for a connection that closed under a request before any response arrived. */
const staleConnectionCodes: ReadonlySet<string> = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

export function isStaleConnection(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && staleConnectionCodes.has(code);
}
