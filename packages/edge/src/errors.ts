/** Stable error codes of the edge. The HTTP status each maps to lives here, in one place. */
export const EdgeErrorCode = {
  UNKNOWN_SESSION: 'TUNNEL2_ERR_UNKNOWN_SESSION',
  TUNNEL_OFFLINE: 'TUNNEL2_ERR_TUNNEL_OFFLINE',
  TUNNEL_BUSY: 'TUNNEL2_ERR_TUNNEL_BUSY',
  RESPONSE_TIMEOUT: 'TUNNEL2_ERR_RESPONSE_TIMEOUT',
  STREAM_FAILED: 'TUNNEL2_ERR_STREAM_FAILED',
  HEADERS_TOO_LARGE: 'TUNNEL2_ERR_HEADERS_TOO_LARGE',
  BAD_REQUEST: 'TUNNEL2_ERR_BAD_REQUEST',
  INVALID_NAME: 'TUNNEL2_ERR_INVALID_NAME',
  RESERVED_NAME: 'TUNNEL2_ERR_RESERVED_NAME',
  NAME_IN_USE: 'TUNNEL2_ERR_NAME_IN_USE',
  UPGRADE_UNSUPPORTED: 'TUNNEL2_ERR_UPGRADE_UNSUPPORTED',
  INVALID_CONFIG: 'TUNNEL2_ERR_INVALID_CONFIG',
  DRAINING: 'TUNNEL2_ERR_DRAINING',
} as const;
export type EdgeErrorCode = (typeof EdgeErrorCode)[keyof typeof EdgeErrorCode];

export const statusByCode: Readonly<Record<EdgeErrorCode, number>> = {
  TUNNEL2_ERR_UNKNOWN_SESSION: 404,
  TUNNEL2_ERR_TUNNEL_OFFLINE: 502,
  TUNNEL2_ERR_TUNNEL_BUSY: 503,
  TUNNEL2_ERR_RESPONSE_TIMEOUT: 504,
  TUNNEL2_ERR_STREAM_FAILED: 502,
  TUNNEL2_ERR_HEADERS_TOO_LARGE: 431,
  TUNNEL2_ERR_BAD_REQUEST: 400,
  TUNNEL2_ERR_INVALID_NAME: 400,
  TUNNEL2_ERR_RESERVED_NAME: 403,
  TUNNEL2_ERR_NAME_IN_USE: 409,
  TUNNEL2_ERR_UPGRADE_UNSUPPORTED: 501,
  TUNNEL2_ERR_INVALID_CONFIG: 500,
  TUNNEL2_ERR_DRAINING: 503,
};

export class EdgeError extends Error {
  readonly code: EdgeErrorCode;
  readonly statusCode: number;
  constructor(code: EdgeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.statusCode = statusByCode[code];
    this.name = 'EdgeError';
  }
}
