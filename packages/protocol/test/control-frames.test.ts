import { describe, expect, it } from 'vitest';
import {
  decodeFrames,
  ErrorCode,
  encodeGoAway,
  encodeReset,
  encodeWindowUpdate,
  MAX_WINDOW,
  ProtocolError,
  ProtocolErrorCode,
  parseGoAway,
  parseReset,
  parseWindowUpdate,
} from '../src/index.js';
import { hex } from './support/bytes.js';

function payloadOf(frame: Buffer): Buffer {
  const [decoded] = decodeFrames(frame);
  return decoded!.payload;
}

describe('control frames', () => {
  it('RESET carries the error code as u32', () => {
    expect(parseReset(payloadOf(encodeReset(3, ErrorCode.BACKEND_TIMEOUT)))).toBe(ErrorCode.BACKEND_TIMEOUT);
    // Codes from a newer peer survive as numbers.
    expect(parseReset(hex('fffffffe'))).toBe(0xff_ff_ff_fe);
  });

  it('WINDOW_UPDATE round-trips increments from 1 to 2^31-1', () => {
    for (const increment of [1, 4096, MAX_WINDOW]) {
      expect(parseWindowUpdate(payloadOf(encodeWindowUpdate(7, increment)))).toBe(increment);
    }
  });

  it('rejects a WINDOW_UPDATE of 0 or above 2^31-1', () => {
    for (const payload of [hex('00000000'), hex('80000000'), hex('ffffffff')]) {
      let caught: unknown;
      try {
        parseWindowUpdate(payload);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ProtocolError);
      expect((caught as ProtocolError).code).toBe(ProtocolErrorCode.MALFORMED_FRAME);
      expect((caught as ProtocolError).protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    }
  });

  it('GOAWAY carries last stream id, code and a UTF-8 reason', () => {
    const goAway = { lastStreamId: 41, code: ErrorCode.GOING_AWAY, reason: 'redémarrage ✓' };
    const frame = encodeGoAway(goAway);
    expect(frame.subarray(0, 17)).toEqual(
      hex(`0000${(8 + 16).toString(16)} 05 00 00000000 00000029 0000000d`),
    );
    expect(parseGoAway(payloadOf(frame))).toEqual(goAway);
    expect(parseGoAway(hex('00000000 00000000'))).toEqual({ lastStreamId: 0, code: 0, reason: '' });
  });
});
