import { GrpcStatus, grpcErrorFields, grpcStatusOfHttp } from '@tunnel2/protocol';
import { EdgeErrorCode } from '../errors.js';

// The gRPC form of the edge's error answers (PROTOCOL.md, HTTP/2 and gRPC; as Envoy and grpc-gateway
// answer): a gRPC client reads the outcome of a call from `grpc-status` and `grpc-message`, never from the
// HTTP status or a body, so an HTML page or a 502 would reach its application as a bare "UNKNOWN".

/** The gRPC status of an edge error: from its HTTP status (gRPC's own HTTP mapping), a few by code. */
export function grpcStatusOf(code: EdgeErrorCode, httpStatus: number): number {
  if (code === EdgeErrorCode.AGENT_TOO_OLD) return GrpcStatus.UNIMPLEMENTED;
  return grpcStatusOfHttp(httpStatus);
}

/**
 * The head of a trailers-only gRPC answer (status 200, no body: HTTP/2 ends the stream with it) for an
 * edge error, as raw fields; `extra` (Retry-After, WWW-Authenticate) after them.
 */
export function grpcAnswerHeaders(code: EdgeErrorCode, httpStatus: number, message: string): string[] {
  return grpcErrorFields(grpcStatusOf(code, httpStatus), message, code);
}
