/**
 * The gRPC form of an answer the tunnel itself gives (an edge's or an agent's error), as both sides write it
 * (PROTOCOL.md "HTTP/2 and gRPC", item 5; as Envoy and grpc-gateway answer): a gRPC client reads the outcome
 * of a call from `grpc-status` and `grpc-message` in a trailers-only answer, never from the HTTP status or a
 * body, so an HTML page or a 502 would reach its application as a bare UNKNOWN.
 */

/** `application/grpc`, `application/grpc+proto`, `application/grpc;…` (case-insensitive). */
export function isGrpcContentType(value: string | string[] | undefined): boolean {
  if (typeof value !== 'string' || value.length < 16) return false;
  if (value.slice(0, 16).toLowerCase() !== 'application/grpc') return false;
  if (value.length === 16) return true;
  const next = value.charCodeAt(16);
  return next === 43 /* + */ || next === 59 /* ; */;
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

/**
 * The fields of a trailers-only gRPC answer (HTTP 200, no body: the head ends the stream): content type,
 * `grpc-status`, `grpc-message` and the tunnel's `x-tunnel2-error` code, as raw pairs.
 */
export function grpcErrorFields(grpcStatus: number, message: string, code: string): string[] {
  return [
    'content-type',
    'application/grpc',
    'grpc-status',
    String(grpcStatus),
    'grpc-message',
    encodeGrpcMessage(message),
    'x-tunnel2-error',
    code,
  ];
}
