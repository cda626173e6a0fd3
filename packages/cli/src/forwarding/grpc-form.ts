import type { ExchangeRecorder } from '@tunnel2/inspector';
import { encodeResponseHead, type MuxStream, type RawHeaders } from '@tunnel2/protocol';
import type { BackendErrorCode } from './backend-error-answer.js';

/**
 * gRPC requests and the form of the agent's own error answers to them (PROTOCOL.md "HTTP/2 and gRPC",
 * item 5). A gRPC client reads no HTML page and no 502: it reads `grpc-status` in a trailers-only answer,
 * as Envoy and grpc-gateway send for the errors they raise themselves.
 */

/** `application/grpc`, `application/grpc+proto`, `application/grpc;…` in any case. */
export function isGrpcContentType(value: string): boolean {
  const lower = value.trim().toLowerCase();
  if (!lower.startsWith('application/grpc')) return false;
  const next = lower.charAt('application/grpc'.length);
  return next === '' || next === '+' || next === ';';
}

/** Whether a request head is a gRPC call: its (first) `content-type` is gRPC's. */
export function isGrpcRequest(headers: RawHeaders): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === 'content-type') return isGrpcContentType(headers[i + 1]!);
  }
  return false;
}

/** gRPC status codes the tunnel answers with (grpc/doc/statuscodes.md). */
export const GrpcStatus = {
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** The gRPC status of an error the tunnel would answer with this HTTP status (gRPC's own HTTP mapping). */
export function grpcStatusOfHttp(status: number): number {
  switch (status) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 408:
    case 504:
      return GrpcStatus.DEADLINE_EXCEEDED;
    case 413:
    case 431:
      return GrpcStatus.RESOURCE_EXHAUSTED;
    case 429:
    case 502:
    case 503:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** `grpc-message` as the gRPC spec encodes it: UTF-8, bytes outside 0x20-0x7E and `%` as `%XX`. */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
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
  const headers = [
    'content-type',
    'application/grpc',
    'grpc-status',
    String(answer.grpcStatus),
    'grpc-message',
    encodeGrpcMessage(answer.message),
    'x-tunnel2-error',
    answer.code,
  ];
  const head = encodeResponseHead({ status: 200, statusMessage: '', headers }, maxHeadSize);
  recorder?.responseHead(200, headers, head);
  stream.sendHeaders(head, true);
}
