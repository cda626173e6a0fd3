/** Stable error codes of the inspector (its API answers carry them in `{ error: { code, message } }`). */
export const InspectorErrorCode = {
  INVALID_OPTION: 'TUNNEL2_ERR_INSPECTOR_INVALID_OPTION',
  NOT_FOUND: 'TUNNEL2_ERR_INSPECTOR_NOT_FOUND',
  ENTRY_NOT_FOUND: 'TUNNEL2_ERR_INSPECTOR_ENTRY_NOT_FOUND',
  BAD_REQUEST: 'TUNNEL2_ERR_INSPECTOR_BAD_REQUEST',
  METHOD_NOT_ALLOWED: 'TUNNEL2_ERR_INSPECTOR_METHOD_NOT_ALLOWED',
  FORBIDDEN_HOST: 'TUNNEL2_ERR_INSPECTOR_FORBIDDEN_HOST',
  /** An API request sent by another origin's page (Sec-Fetch-Site or Origin say so). */
  FORBIDDEN_ORIGIN: 'TUNNEL2_ERR_INSPECTOR_FORBIDDEN_ORIGIN',
  /** As many expensive reads (HAR export, body search) or live streams run as are allowed: try again later. */
  BUSY: 'TUNNEL2_ERR_INSPECTOR_BUSY',
  REPLAY_FAILED: 'TUNNEL2_ERR_INSPECTOR_REPLAY_FAILED',
  LISTEN_FAILED: 'TUNNEL2_ERR_INSPECTOR_LISTEN_FAILED',
  /** A failure of the inspector itself (a bug): the API answers 500 with it. */
  INTERNAL: 'TUNNEL2_ERR_INSPECTOR_INTERNAL',
} as const;
export type InspectorErrorCode = (typeof InspectorErrorCode)[keyof typeof InspectorErrorCode];

/** The HTTP status each code answers with. */
export const inspectorErrorStatus: Record<InspectorErrorCode, number> = {
  [InspectorErrorCode.INVALID_OPTION]: 400,
  [InspectorErrorCode.NOT_FOUND]: 404,
  [InspectorErrorCode.ENTRY_NOT_FOUND]: 404,
  [InspectorErrorCode.BAD_REQUEST]: 400,
  [InspectorErrorCode.METHOD_NOT_ALLOWED]: 405,
  [InspectorErrorCode.FORBIDDEN_HOST]: 403,
  [InspectorErrorCode.FORBIDDEN_ORIGIN]: 403,
  [InspectorErrorCode.BUSY]: 503,
  [InspectorErrorCode.REPLAY_FAILED]: 502,
  [InspectorErrorCode.LISTEN_FAILED]: 500,
  [InspectorErrorCode.INTERNAL]: 500,
};

export class InspectorError extends Error {
  readonly code: InspectorErrorCode;
  constructor(code: InspectorErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.code = code;
    this.name = 'InspectorError';
  }
}
