import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  encodeResponseHead,
  grpcErrorFields,
  isFieldName,
  isGrpcContentType,
  type MuxStream,
  type RawHeaders,
} from '@tunnel2/protocol';
import type { BackendErrorCode } from './backend-error-answer.js';

/**
 * gRPC requests and the form of the agent's own error answers to them (PROTOCOL.md "HTTP/2 and gRPC",
 * item 5). A gRPC client reads no HTML page and no 502: it reads `grpc-status` in a trailers-only answer,
 * as Envoy and grpc-gateway send for the errors they raise themselves.
 */

/** Whether a request head is a gRPC call: its (first) `content-type` is gRPC's. */
export function isGrpcRequest(headers: RawHeaders): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (isFieldName(headers[i]!, 'content-type')) return isGrpcContentType(headers[i + 1]!);
  }
  return false;
}

/** An error answered to a gRPC request. */
export interface GrpcErrorAnswer {
  grpcStatus: number;
  message: string;
  /** The `x-tunnel2-error` code, as on the text form of the same error. */
  code: BackendErrorCode;
}

/**
 * Sends the answer as one final head with END_STREAM (trailers-only): HTTP 200, `content-type:
 * application/grpc`, `grpc-status`, `grpc-message`, `x-tunnel2-error`, no body.
 */
export function sendGrpcErrorAnswer(
  stream: MuxStream,
  answer: GrpcErrorAnswer,
  maxHeadSize: number,
  recorder: ExchangeRecorder | undefined,
): void {
  const headers = grpcErrorFields(answer.grpcStatus, answer.message, answer.code);
  const head = encodeResponseHead({ status: 200, statusMessage: '', headers }, maxHeadSize);
  recorder?.responseHead(200, headers, head);
  stream.sendHeaders(head, true);
}
