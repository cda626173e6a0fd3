import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { EdgeError, type EdgeErrorCode, statusByCode } from './errors.js';

/**
 * Answers a public request with a short, specific plain-text error. The `x-tunnel2-error` header carries
 * the stable code so scripts and tests never have to read the prose.
 */
export function sendEdgeError(
  res: ServerResponse,
  code: EdgeErrorCode,
  message: string,
  retryAfterS?: number,
  extraHeaders?: Record<string, string>,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `${message}\n`;
  const headers: Record<string, string | number> = {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-tunnel2-error': code,
  };
  if (retryAfterS !== undefined) headers['retry-after'] = retryAfterS;
  if (extraHeaders !== undefined) Object.assign(headers, extraHeaders);
  res.writeHead(statusByCode[code], headers);
  res.end(body);
}

/** Refuses an HTTP upgrade on a raw socket (before any WebSocket handshake). */
export function rejectUpgrade(
  socket: Duplex,
  error: EdgeError | { code: EdgeErrorCode; message: string; retryAfterS?: number | undefined },
): void {
  const status = statusByCode[error.code];
  const body = `${error.message}\n`;
  const retryAfter =
    'retryAfterS' in error && error.retryAfterS !== undefined ? `Retry-After: ${error.retryAfterS}\r\n` : '';
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Connection: close\r\n' +
      'Content-Type: text/plain; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      retryAfter +
      `x-tunnel2-error: ${error.code}\r\n\r\n${body}`,
  );
  // The answer is flushed before the socket goes; a client that never closes its side is cut off later.
  socket.once('finish', () => setTimeout(() => socket.destroy(), 1_000).unref());
}

export { EdgeError };
