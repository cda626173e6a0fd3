import { ErrorCode, errorCodeName } from './constants.js';

/** Stable error codes of the protocol package. Branch on these, never on messages. */
export const ProtocolErrorCode = {
  FRAME_TOO_LARGE: 'TUNNEL2_ERR_FRAME_TOO_LARGE',
  MALFORMED_FRAME: 'TUNNEL2_ERR_MALFORMED_FRAME',
  MALFORMED_HEAD: 'TUNNEL2_ERR_MALFORMED_HEAD',
  HEAD_TOO_LARGE: 'TUNNEL2_ERR_HEAD_TOO_LARGE',
  FLOW_CONTROL: 'TUNNEL2_ERR_FLOW_CONTROL',
  STREAM_STATE: 'TUNNEL2_ERR_STREAM_STATE',
  TOO_MANY_STREAMS: 'TUNNEL2_ERR_TOO_MANY_STREAMS',
  VERSION_UNSUPPORTED: 'TUNNEL2_ERR_VERSION_UNSUPPORTED',
  SESSION_CLOSED: 'TUNNEL2_ERR_SESSION_CLOSED',
  INVALID_SETTING: 'TUNNEL2_ERR_INVALID_SETTING',
  /** The peer passed a flood limit (FloodLimits); wire code ENHANCE_YOUR_CALM. */
  FLOOD: 'TUNNEL2_ERR_FLOOD',
} as const;
export type ProtocolErrorCode = (typeof ProtocolErrorCode)[keyof typeof ProtocolErrorCode];

const brand = Symbol.for('tunnel2.error');

/** Base of every tunnel2 error: a stable `code` and an optional `cause`. */
export class Tunnel2Error extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
  /** True for a tunnel2 error even when it comes from another copy of this package. */
  static isTunnel2Error(value: unknown): value is Tunnel2Error {
    return typeof value === 'object' && value !== null && (value as { [brand]?: boolean })[brand] === true;
  }
}
Object.defineProperty(Tunnel2Error.prototype, brand, { value: true });

/** A violation of the wire protocol; `protocolCode` is the wire error code to send to the peer. */
export class ProtocolError extends Tunnel2Error {
  readonly protocolCode: ErrorCode;
  constructor(
    code: ProtocolErrorCode,
    protocolCode: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.protocolCode = protocolCode;
  }
}

/** A stream ended by a RESET (from the peer, or because the session closed). */
export class StreamResetError extends Tunnel2Error {
  readonly protocolCode: number;
  constructor(protocolCode: number, message = `stream reset: ${errorCodeName(protocolCode)}`) {
    super('TUNNEL2_ERR_STREAM_RESET', message);
    this.protocolCode = protocolCode;
  }
}

export function isProtocolError(value: unknown): value is ProtocolError {
  return value instanceof ProtocolError;
}

export function frameError(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.MALFORMED_FRAME, ErrorCode.PROTOCOL_ERROR, message);
}

/** Fired when a session ends because the peer went silent for two heartbeat intervals. */
export class PeerTimeoutError extends Tunnel2Error {
  constructor(ms: number) {
    super('TUNNEL2_ERR_PEER_TIMEOUT', `peer sent nothing for ${ms} ms`);
  }
}
