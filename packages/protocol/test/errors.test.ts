import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  errorCodeName,
  frameError,
  isProtocolError,
  ProtocolError,
  ProtocolErrorCode,
  StreamResetError,
  Tunnel2Error,
} from '../src/index.js';

describe('errors', () => {
  it('every protocol error code is a stable TUNNEL2_ERR_* string', () => {
    for (const code of Object.values(ProtocolErrorCode)) expect(code).toMatch(/^TUNNEL2_ERR_[A-Z_]+$/);
  });

  it('wire error codes are distinct and named', () => {
    const codes = Object.values(ErrorCode);
    expect(new Set(codes).size).toBe(codes.length);
    expect(errorCodeName(ErrorCode.BACKEND_UNREACHABLE)).toBe('BACKEND_UNREACHABLE');
    expect(errorCodeName(99)).toBe('UNKNOWN(99)');
  });

  it('ProtocolError carries code, wire code, cause and its class name', () => {
    const cause = new Error('underlying');
    const error = new ProtocolError(
      ProtocolErrorCode.FLOW_CONTROL,
      ErrorCode.FLOW_CONTROL_ERROR,
      'too much',
      { cause },
    );
    expect(error).toBeInstanceOf(Tunnel2Error);
    expect(error.name).toBe('ProtocolError');
    expect(error.code).toBe('TUNNEL2_ERR_FLOW_CONTROL');
    expect(error.protocolCode).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    expect(error.cause).toBe(cause);
    expect(isProtocolError(error)).toBe(true);
    expect(isProtocolError(cause)).toBe(false);
  });

  it('frameError is a MALFORMED_FRAME with PROTOCOL_ERROR on the wire', () => {
    const error = frameError('bad');
    expect(error.code).toBe(ProtocolErrorCode.MALFORMED_FRAME);
    expect(error.protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it('StreamResetError names the wire code', () => {
    const error = new StreamResetError(ErrorCode.CANCEL);
    expect(error.code).toBe('TUNNEL2_ERR_STREAM_RESET');
    expect(error.protocolCode).toBe(ErrorCode.CANCEL);
    expect(error.message).toContain('CANCEL');
  });

  it('the brand recognises tunnel2 errors from another copy of the package', () => {
    expect(Tunnel2Error.isTunnel2Error(new StreamResetError(1))).toBe(true);
    expect(Tunnel2Error.isTunnel2Error(new Error('x'))).toBe(false);
    expect(Tunnel2Error.isTunnel2Error(null)).toBe(false);
    const foreign = Object.assign(new Error('copy'), {
      [Symbol.for('tunnel2.error')]: true,
      code: 'TUNNEL2_ERR_X',
    });
    expect(Tunnel2Error.isTunnel2Error(foreign)).toBe(true);
  });
});
