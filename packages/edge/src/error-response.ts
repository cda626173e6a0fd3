import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { EdgeError, EdgeErrorCode, statusByCode } from './errors.js';
import { publishRefusal } from './refusal-channel.js';

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
  publishRefusal(res.req.socket, code);
}

/** Refuses an HTTP upgrade on a raw socket (before any WebSocket handshake). */
export function rejectUpgrade(
  socket: Duplex,
  error: EdgeError | { code: EdgeErrorCode; message: string; retryAfterS?: number | undefined },
): void {
  const status = statusByCode[error.code];
  publishRefusal(socket, error.code);
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

/** What Node's HTTP parser reports on a connection it gives up on (the `clientError` event). */
interface ClientError extends Error {
  code?: string;
}

/** The parts of a server socket a client error answer needs; `_httpMessage` is the response in progress. */
interface ClientSocket extends Duplex {
  _httpMessage?: { headersSent: boolean } | null;
}

/**
 * Answers a connection Node's HTTP server gives up on before a request reached a handler: a head or
 * request not received in time (408), a head over the size limit (431), bytes that are not HTTP (400).
 * Same plain-text form and `x-tunnel2-error` code as every other edge error; the connection then closes.
 */
export function answerClientError(error: ClientError, socket: ClientSocket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const code =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? EdgeErrorCode.REQUEST_TIMEOUT
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? EdgeErrorCode.HEADERS_TOO_LARGE
        : EdgeErrorCode.BAD_REQUEST;
  const message =
    code === EdgeErrorCode.REQUEST_TIMEOUT
      ? 'the request was not received in time'
      : code === EdgeErrorCode.HEADERS_TOO_LARGE
        ? 'the request head is larger than this edge accepts'
        : 'malformed HTTP request';
  publishRefusal(socket, code);
  // A response already on its way cannot be replaced by an error: the connection just closes.
  if (socket.writable && socket._httpMessage?.headersSent !== true) {
    const status = statusByCode[code];
    const body = `${message}\n`;
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
        'Connection: close\r\n' +
        'Content-Type: text/plain; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `x-tunnel2-error: ${code}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

export { EdgeError };
