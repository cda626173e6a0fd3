/**
 * The answer the agent gives in place of a backend's, as a value. backend-error.ts makes and sends it, and
 * imports the two modules that also need its type: target-tls.ts (which makes it for a certificate or a
 * handshake) and backend-error-page.ts (which renders it). The type lives below all three, so neither of
 * those has to import backend-error.ts back.
 */

export type BackendErrorCode =
  | 'TUNNEL2_ERR_BACKEND_UNREACHABLE'
  | 'TUNNEL2_ERR_BACKEND_CLOSED'
  | 'TUNNEL2_ERR_BACKEND_TIMEOUT'
  | 'TUNNEL2_ERR_BACKEND_INVALID_RESPONSE'
  | 'TUNNEL2_ERR_TARGET_TLS'
  /** A gRPC call for a backend spoken to over HTTP/1.1 (answered in the gRPC form only). */
  | 'TUNNEL2_ERR_BACKEND_NOT_HTTP2';

/** The synthetic answer the agent sends when the backend gave no usable response head. */
export interface BackendErrorAnswer {
  status: number;
  message: string;
  code: BackendErrorCode;
}
