import { EdgeErrorCode } from '../errors.js';

// The gRPC form of the edge's error answers (PROTOCOL.md, HTTP/2 and gRPC; as Envoy and grpc-gateway
// answer): a gRPC client reads the outcome of a call from `grpc-status` and `grpc-message`, never from the
// HTTP status or a body, so an HTML page or a 502 would reach its application as a bare "UNKNOWN".

/** `application/grpc`, `application/grpc+proto`, `application/grpc;…` (case-insensitive). */
export function isGrpcContentType(value: string | string[] | undefined): boolean {
  if (typeof value !== 'string' || value.length < 16) return false;
  if (value.slice(0, 16).toLowerCase() !== 'application/grpc') return false;
  if (value.length === 16) return true;
  const next = value.charCodeAt(16);
  return next === 43 /* + */ || next === 59 /* ; */;
}

/** gRPC status codes the edge answers with. */
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

/** The gRPC status of an edge error: from its HTTP status (gRPC's own HTTP mapping), a few by code. */
export function grpcStatusOf(code: EdgeErrorCode, httpStatus: number): number {
  if (code === EdgeErrorCode.AGENT_TOO_OLD) return GrpcStatus.UNIMPLEMENTED;
  switch (httpStatus) {
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
  const bytes = Buffer.from(message, 'utf8');
  let out = '';
  for (const byte of bytes) {
    out +=
      byte < 0x20 || byte > 0x7e || byte === 0x25
        ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
        : String.fromCharCode(byte);
  }
  return out;
}

/**
 * The head of a trailers-only gRPC answer (status 200, no body: HTTP/2 ends the stream with it) for an
 * edge error, as raw fields; `extra` (Retry-After, WWW-Authenticate) after them.
 */
export function grpcAnswerHeaders(code: EdgeErrorCode, httpStatus: number, message: string): string[] {
  return [
    'content-type',
    'application/grpc',
    'grpc-status',
    String(grpcStatusOf(code, httpStatus)),
    'grpc-message',
    encodeGrpcMessage(message),
    'x-tunnel2-error',
    code,
  ];
}
