import { ERROR_PAGE_HEADERS } from '@tunnel2/edge/error-page';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  encodeResponseHead,
  GrpcStatus,
  grpcStatusOfHttp,
  type MuxStream,
  type RawHeaders,
} from '@tunnel2/protocol';
import type { BackendErrorAnswer } from './backend-error-answer.js';
import { askOfRequest, backendErrorBody } from './backend-error-page.js';
import { isGrpcRequest, sendGrpcErrorAnswer } from './grpc-form.js';
import type { Target } from './target.js';
import { describeTlsError } from './target-tls.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { maxHeaderSize } = process.getBuiltinModule('node:http');

/** The error's stable code (undici's `UND_ERR_*`, llhttp's `HPE_*`, a system `E*`), else its name. */
export function backendErrorCode(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : error.name;
}

/** A connection that ended under a request: undici's and node:http's codes. */
const connectionLost: ReadonlySet<string> = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/**
 * Classifies a failure that happened before any final response head reached the client, as an edge
 * proxy does (HAProxy's "SH"/"PH" termination states, Envoy's "UF"/"UPE"): the backend could not be
 * reached (refused, unknown host) → UNREACHABLE; it took the connection and closed it without a byte of
 * answer (it crashed on the request, or died) → CLOSED; it did not answer in time →
 * TIMEOUT; it was reached and began answering but the head was malformed, cut short or too large →
 * INVALID_RESPONSE; an https:// target whose certificate or handshake failed → TARGET_TLS. `answerBegun`: at
 * least one byte of a response arrived for this request.
 */
export function describeBackendError(error: Error, host: string, answerBegun: boolean): BackendErrorAnswer {
  const code = backendErrorCode(error);
  const tls = describeTlsError(code, host);
  if (tls !== undefined) return tls;
  const invalid = (what: string): BackendErrorAnswer => ({
    status: 502,
    message: `tunnel2: backend on ${host} ${what}`,
    code: 'TUNNEL2_ERR_BACKEND_INVALID_RESPONSE',
  });
  switch (code) {
    case 'ECONNREFUSED':
      return {
        status: 502,
        message: `tunnel2: backend refused connection on ${host}`,
        code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
      };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return {
        status: 502,
        message: `tunnel2: backend host of ${host} could not be resolved`,
        code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
      };
    // A connection not made in time (undici's connect timeout, the HTTP/2 dial's, the system's): 504 as
    // before, but for a gRPC call UNAVAILABLE, as Envoy answers a connect timeout (its 503 "UF"): the
    // call's own deadline did not pass, and a client may retry it elsewhere.
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return {
        status: 504,
        message: `tunnel2: backend on ${host} did not answer in time`,
        code: 'TUNNEL2_ERR_BACKEND_TIMEOUT',
        grpcStatus: GrpcStatus.UNAVAILABLE,
      };
    // An HTTP/2 session whose backend left a keep-alive PING unanswered (http2/h2-keepalive.ts): it took
    // the request and went silent (stopped, wedged, gone without a RST). UNAVAILABLE for a gRPC call, as
    // Envoy answers the streams of a connection its keepalive closed: the call may be retried elsewhere.
    case 'TUNNEL2_ERR_BACKEND_PING_TIMEOUT':
      return {
        status: 504,
        message: `tunnel2: backend on ${host} stopped answering: ${error.message}`,
        code: 'TUNNEL2_ERR_BACKEND_TIMEOUT',
        grpcStatus: GrpcStatus.UNAVAILABLE,
      };
    case 'UND_ERR_HEADERS_TIMEOUT':
      return {
        status: 504,
        message: `tunnel2: backend on ${host} did not answer in time`,
        code: 'TUNNEL2_ERR_BACKEND_TIMEOUT',
      };
    // undici's and llhttp's limit on a response head (node:http's maxHeaderSize, 16 KB by default).
    case 'UND_ERR_HEADERS_OVERFLOW':
    case 'HPE_HEADER_OVERFLOW':
      return invalid(`sent a response head larger than ${maxHeaderSize} bytes`);
    // `--h2c` towards a server that answered the HTTP/2 preface with something else (h2-backend.ts).
    case 'TUNNEL2_ERR_BACKEND_NOT_HTTP2_SERVER':
      return invalid('does not speak HTTP/2 with prior knowledge (an HTTP/1.1 server? run without --h2c)');
    // The head fitted undici's limit but not one tunnel frame (the edge's maxFrameSize).
    case 'TUNNEL2_ERR_HEAD_TOO_LARGE':
      return invalid(`sent a response head larger than the tunnel carries (${error.message})`);
    // Two different Content-Length values: undici reports it as a length mismatch, llhttp by name.
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
    case 'HTTPParserError':
      return invalid(`sent a malformed response (${code})`);
    default:
      if (code.startsWith('HPE_')) return invalid(`sent a malformed response (${code})`);
      if (connectionLost.has(code)) {
        return answerBegun
          ? invalid('closed the connection before completing its response head')
          : {
              status: 502,
              message: `tunnel2: backend on ${host} closed the connection before answering (${code})`,
              code: 'TUNNEL2_ERR_BACKEND_CLOSED',
            };
      }
      return {
        status: 502,
        message: `tunnel2: backend on ${host} failed (${code})`,
        code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
      };
  }
}

/** RFC 9113 §7 error codes by value, as messages name them. */
const h2ErrorNames = [
  'NO_ERROR',
  'PROTOCOL_ERROR',
  'INTERNAL_ERROR',
  'FLOW_CONTROL_ERROR',
  'SETTINGS_TIMEOUT',
  'STREAM_CLOSED',
  'FRAME_SIZE_ERROR',
  'REFUSED_STREAM',
  'CANCEL',
  'COMPRESSION_ERROR',
  'CONNECT_ERROR',
  'ENHANCE_YOUR_CALM',
  'INADEQUATE_SECURITY',
  'HTTP_1_1_REQUIRED',
];
/** Codes that say the bytes were refused as HTTP/2 (by either side), not that the backend gave up. */
const h2Malformed: ReadonlySet<string> = new Set([
  'PROTOCOL_ERROR',
  'FRAME_SIZE_ERROR',
  'COMPRESSION_ERROR',
  'ENHANCE_YOUR_CALM',
]);

/**
 * An HTTP/2 backend stream reset before any response head (other than CANCEL and REFUSED_STREAM, which
 * travel on as resets): the agent answers, as Envoy does for an upstream reset before headers, rather than
 * leave the edge to call it a failure of the tunnel. A code that refuses the bytes (a response head larger
 * than the agent takes: FRAME_SIZE_ERROR) is an invalid response; any other, the backend giving up.
 */
export function describeBackendReset(rstCode: number, host: string): BackendErrorAnswer {
  const name = h2ErrorNames[rstCode] ?? `0x${rstCode.toString(16)}`;
  if (h2Malformed.has(name)) {
    return {
      status: 502,
      message: `tunnel2: backend on ${host} sent a response HTTP/2 refused (${name}; a response head too large?)`,
      code: 'TUNNEL2_ERR_BACKEND_INVALID_RESPONSE',
    };
  }
  return {
    status: 502,
    message: `tunnel2: backend on ${host} reset the stream before answering (HTTP/2 ${name})`,
    code: 'TUNNEL2_ERR_BACKEND_CLOSED',
  };
}

/** The request a backend error answers: the page's form follows its Accept, a HEAD gets no body. */
export interface AnsweredRequest {
  method: string;
  headers: RawHeaders;
  target: Target;
}

/**
 * Sends the agent's own answer for a backend that gave no usable head, shown to the inspector like any
 * response: its `x-tunnel2-error` code and a body in the form the client asked for (backend-error-page.ts):
 * the short text line for curl and scripts, a page for a browser, JSON. Negotiated, so `Vary: Accept`; the
 * headers the edge puts on its own answers (no-store, nosniff, a CSP that lets the page load nothing).
 * A gRPC call gets the same error in the gRPC form instead (grpc-form.ts): a gRPC client reads no page.
 */
export function sendBackendErrorAnswer(
  stream: MuxStream,
  answer: BackendErrorAnswer,
  maxHeadSize: number,
  recorder: ExchangeRecorder | undefined,
  request: AnsweredRequest,
): void {
  if (isGrpcRequest(request.headers)) {
    const grpcStatus = answer.grpcStatus ?? grpcStatusOfHttp(answer.status);
    sendGrpcErrorAnswer(
      stream,
      { grpcStatus, message: answer.message, code: answer.code },
      maxHeadSize,
      recorder,
    );
    return;
  }
  const ask = askOfRequest(request.method, request.headers);
  const { contentType, body } = backendErrorBody(answer, request.target, ask);
  const headers = [
    'content-type',
    contentType,
    'content-length',
    String(body.length),
    'cache-control',
    'no-store',
    'x-content-type-options',
    'nosniff',
    ...Object.entries(ERROR_PAGE_HEADERS).flat(),
    'x-tunnel2-error',
    answer.code,
  ];
  const head = encodeResponseHead({ status: answer.status, statusMessage: '', headers }, maxHeadSize);
  const bodyless = ask.method === 'HEAD';
  recorder?.responseHead(answer.status, headers, head);
  if (!bodyless) recorder?.responseData(body);
  stream.sendHeaders(head, bodyless);
  if (bodyless) return;
  stream.write(body);
  stream.end();
}
