import type { Duplex } from 'node:stream';
import { isGrpcContentType } from '@tunnel2/protocol';
import { EdgeError, EdgeErrorCode, statusByCode } from '../errors.js';
import type { PublicMessage, PublicResponse } from '../exchange/public-message.js';
import { abortResponse } from '../exchange/response-abort.js';
import { REQUEST_ID_HEADER } from '../public/request-id.js';
import type { ErrorFacts } from './error-facts.js';
import { negotiateErrorFormat } from './error-format.js';
import { edgeErrorFacts } from './error-hints.js';
import { ERROR_PAGE_HEADERS, type ErrorAsk, errorBody } from './error-page.js';
import { grpcAnswerHeaders } from './grpc-answer.js';
import { publishRefusal } from './refusal-channel.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/**
 * Headers on every answer the edge writes itself. A plain-text body may repeat what the client sent;
 * `nosniff` keeps a browser from reading it as HTML or script whatever it contains.
 */
export const EDGE_ANSWER_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

/** An answer of the edge's own: its status, its raw header fields (name, value, …) and its body. */
export interface EdgeAnswer {
  status: number;
  headers: string[];
  body: Buffer;
}

/** What the public client's request says about the answer it can take, and where it was sent. */
export interface EdgeAsk extends ErrorAsk {
  /** The Host the client asked for, named on the page as the edge it reached. */
  host?: string | undefined;
  /** A gRPC call (its content type): answered in the gRPC form (grpc-answer.ts), whatever it accepts. */
  grpc?: boolean | undefined;
}

/** The ask of a request that reached the edge's HTTP server. */
export function askOf(req: Pick<PublicMessage, 'headers' | 'method'>): EdgeAsk {
  const requestId = req.headers[REQUEST_ID_HEADER];
  return {
    accept: req.headers.accept,
    method: req.method,
    host: req.headers.host,
    requestId: typeof requestId === 'string' ? requestId : undefined,
    grpc: isGrpcContentType(req.headers['content-type']),
  };
}

/**
 * The answer the edge writes itself for `code`, with the `x-tunnel2-error` header carrying the stable code
 * so scripts and tests never have to read the prose. Its body is the form `ask` negotiates
 * (error-format.ts): the short plain-text line that curl and scripts have always had, an HTML page for a
 * browser, JSON for a client that asks for it; a HEAD gets the headers alone. Without an `ask` (no
 * request known) it is the plain text, and nothing says it varies. `extraHeaders` come last (names and
 * values the edge chose, never the client's). One place for every path that answers: a public response
 * here, a refusal a holder writes on a node link for another node to relay (cluster/link/link-request.ts),
 * which is why the client's ask travels with the call rather than being read from a response.
 */
export function edgeAnswer(
  code: EdgeErrorCode,
  message: string,
  retryAfterS?: number,
  extraHeaders?: Readonly<Record<string, string>>,
  ask?: EdgeAsk,
): EdgeAnswer {
  const status = statusByCode[code];
  if (ask?.grpc === true) {
    // Trailers-only: HTTP status 200 and no body, the outcome in grpc-status (HTTP/2 ends the stream here).
    const headers = grpcAnswerHeaders(code, status, message);
    headers.push('content-length', '0');
    if (retryAfterS !== undefined) headers.push('retry-after', String(retryAfterS));
    if (extraHeaders !== undefined) headers.push(...Object.entries(extraHeaders).flat());
    return { status: 200, headers, body: Buffer.alloc(0) };
  }
  const format = ask === undefined ? 'text' : negotiateErrorFormat(ask.accept);
  const { contentType, body } = errorBody(
    format === 'text' ? plainFacts(code, message) : edgeErrorFacts(code, message, retryAfterS, ask ?? {}),
    format,
  );
  const headers = [
    'content-type',
    contentType,
    'content-length',
    String(body.length),
    ...Object.entries(EDGE_ANSWER_HEADERS).flat(),
  ];
  if (ask !== undefined) headers.push(...Object.entries(ERROR_PAGE_HEADERS).flat());
  headers.push('x-tunnel2-error', code);
  if (retryAfterS !== undefined) headers.push('retry-after', String(retryAfterS));
  if (extraHeaders !== undefined) headers.push(...Object.entries(extraHeaders).flat());
  return { status, headers, body: ask?.method === 'HEAD' ? Buffer.alloc(0) : body };
}

/** The plain-text form needs the message alone. */
function plainFacts(code: EdgeErrorCode, message: string): ErrorFacts {
  return { status: statusByCode[code], title: '', code, message, where: 'edge', hint: '' };
}

/**
 * Answers a public request with a short, specific error in the form its client asked for (see
 * `edgeAnswer`).
 */
export function sendEdgeError(
  res: PublicResponse,
  code: EdgeErrorCode,
  message: string,
  retryAfterS?: number,
  extraHeaders?: Readonly<Record<string, string>>,
): void {
  if (res.headersSent) {
    abortResponse(res);
    return;
  }
  const answer = edgeAnswer(code, message, retryAfterS, extraHeaders, askOf(res.req));
  // HTTP/2: a head without a body ends the stream with it (a gRPC trailers-only answer must).
  if (answer.body.length === 0 && res.endWithHead !== undefined)
    res.endWithHead(answer.status, answer.headers);
  else {
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  }
  publishRefusal(res.req.socket, code);
}

/** Answers a public request with a refusal, everything it carries included (Retry-After, its headers). */
export function sendRefusal(
  res: PublicResponse,
  refusal: Readonly<{
    code: EdgeErrorCode;
    message: string;
    retryAfterS?: number | undefined;
    headers?: Readonly<Record<string, string>> | undefined;
  }>,
): void {
  sendEdgeError(res, refusal.code, refusal.message, refusal.retryAfterS, refusal.headers);
}

const RAW_ANSWER_HEADERS = Object.entries(EDGE_ANSWER_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

/** An edge answer as raw bytes, for a socket Node's HTTP server no longer writes to; always closes. */
function rawAnswer(code: EdgeErrorCode, message: string, extra = ''): string {
  const status = statusByCode[code];
  const body = `${message}\n`;
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
    'Connection: close\r\n' +
    'Content-Type: text/plain; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    RAW_ANSWER_HEADERS +
    extra +
    `x-tunnel2-error: ${code}\r\n\r\n${body}`
  );
}

/**
 * Refuses an HTTP upgrade (before any WebSocket handshake) or a CONNECT on a raw socket. `headers` are
 * added as given (names and values the edge chose, never the client's).
 */
export function rejectUpgrade(
  socket: Duplex,
  error:
    | EdgeError
    | {
        code: EdgeErrorCode;
        message: string;
        retryAfterS?: number | undefined;
        headers?: Record<string, string>;
      },
): void {
  publishRefusal(socket, error.code);
  let extra =
    'retryAfterS' in error && error.retryAfterS !== undefined ? `Retry-After: ${error.retryAfterS}\r\n` : '';
  if ('headers' in error && error.headers !== undefined) {
    for (const [name, value] of Object.entries(error.headers)) extra += `${name}: ${value}\r\n`;
  }
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(rawAnswer(error.code, error.message, extra));
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
  bytesRead?: number;
}

function classify(error: ClientError): { code: EdgeErrorCode; message: string } {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: EdgeErrorCode.REQUEST_TIMEOUT, message: 'the request was not received in time' };
    case 'HPE_HEADER_OVERFLOW':
      return {
        code: EdgeErrorCode.HEADERS_TOO_LARGE,
        message: 'the request head is larger than this edge accepts',
      };
    // HTTP/1.2, HTTP/3.0, ... and a `PRI * HTTP/2.0` line that is not the whole HTTP/2 preface (the
    // preface itself is served as h2c before this parser sees it): a version HTTP/1 does not speak, which
    // RFC 9110 §15.6.6 answers with 505.
    case 'HPE_INVALID_VERSION':
    case 'HPE_PAUSED_H2_UPGRADE':
      return {
        code: EdgeErrorCode.HTTP_VERSION,
        message: 'this port speaks HTTP/1.0 and HTTP/1.1 only',
      };
    default:
      return { code: EdgeErrorCode.BAD_REQUEST, message: 'malformed HTTP request' };
  }
}

/**
 * Answers a connection Node's HTTP server gives up on before a request reached a handler: a head or
 * request not received in time (408), a head over the size limit (431), an HTTP version other than 1.x
 * (505), bytes that are not HTTP (400). Same plain-text form and `x-tunnel2-error` code as every other
 * edge error; the connection then closes.
 */
export function answerClientError(error: ClientError, socket: ClientSocket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { code, message } = classify(error);
  publishRefusal(socket, code);
  // A connection that never sent a byte (a browser's pre-connect, a port scan) is closed without an
  // answer, as HAProxy's `http-ignore-probes` does: a browser that later sends its request on it would
  // read a 408 it never caused.
  const silent = code === EdgeErrorCode.REQUEST_TIMEOUT && socket.bytesRead === 0;
  // A response already on its way cannot be replaced by an error: the connection just closes.
  if (!silent && socket.writable && socket._httpMessage?.headersSent !== true) {
    socket.write(rawAnswer(code, message));
  }
  socket.destroy();
}

export { EdgeError };
