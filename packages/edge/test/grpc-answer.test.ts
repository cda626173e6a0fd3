import { encodeGrpcMessage, isGrpcContentType } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';
import { grpcStatusOf } from '../src/answers/grpc-answer.js';
import { EdgeErrorCode } from '../src/errors.js';
import { formatGrpcTimeout, parseGrpcTimeout } from '../src/public/grpc-timeout.js';

describe('gRPC content types', () => {
  it('are application/grpc, +suffix and ;parameters, any case; nothing else', () => {
    for (const yes of ['application/grpc', 'application/grpc+proto', 'Application/GRPC;charset=x'])
      expect(isGrpcContentType(yes)).toBe(true);
    for (const no of [
      undefined,
      '',
      'application/grpc-web',
      'application/grpcx',
      'text/plain',
      ['application/grpc'],
    ])
      expect(isGrpcContentType(no)).toBe(false);
  });
});

describe('grpc-message', () => {
  it('percent-encodes bytes outside 0x20-0x7E and % (UTF-8)', () => {
    expect(encodeGrpcMessage('tunnel x: 100% down\n')).toBe('tunnel x: 100%25 down%0A');
    expect(encodeGrpcMessage('café')).toBe('caf%C3%A9');
    expect(decodeURIComponent(encodeGrpcMessage('ünïcode 50%'))).toBe('ünïcode 50%');
  });
});

describe('gRPC status of an edge error', () => {
  it('follows the HTTP status as gRPC maps it, AGENT_TOO_OLD as UNIMPLEMENTED', () => {
    const cases: [number, number][] = [
      [400, 13],
      [401, 16],
      [403, 7],
      [404, 12],
      [408, 4],
      [504, 4],
      [413, 8],
      [431, 8],
      [429, 14],
      [502, 14],
      [503, 14],
      [500, 2],
      [505, 2],
    ];
    for (const [http, grpc] of cases) expect(grpcStatusOf(EdgeErrorCode.STREAM_FAILED, http)).toBe(grpc);
    expect(grpcStatusOf(EdgeErrorCode.AGENT_TOO_OLD, 501)).toBe(12);
  });
});

describe('grpc-timeout', () => {
  it('parses every unit into whole milliseconds, at least 1', () => {
    expect(parseGrpcTimeout('1H')).toBe(3_600_000);
    expect(parseGrpcTimeout('2M')).toBe(120_000);
    expect(parseGrpcTimeout('3S')).toBe(3_000);
    expect(parseGrpcTimeout('250m')).toBe(250);
    expect(parseGrpcTimeout('1500u')).toBe(2);
    expect(parseGrpcTimeout('1n')).toBe(1);
    expect(parseGrpcTimeout('99999999m')).toBe(99_999_999);
  });

  it('ignores a malformed value (as gRPC servers do)', () => {
    for (const bad of [undefined, '', 'S', '1', '1x', '123456789S', '-1S', '1.5S', ' 1S', ['1S']])
      expect(parseGrpcTimeout(bad)).toBeUndefined();
    // Beyond what a timer holds: as good as no deadline.
    expect(parseGrpcTimeout('99999999H')).toBeUndefined();
  });

  it('states a time left in whole ms rounded down, in the coarsest unit that is exact, within 8 digits', () => {
    expect(formatGrpcTimeout(4_599.9)).toBe('4599m');
    expect(formatGrpcTimeout(5_000)).toBe('5S');
    expect(formatGrpcTimeout(5_000.7)).toBe('5S');
    expect(formatGrpcTimeout(120_000)).toBe('2M');
    expect(formatGrpcTimeout(7_200_000)).toBe('2H');
    expect(formatGrpcTimeout(99_999_999)).toBe('99999999m');
    // 9 digits of ms: rounded down to seconds (never more than is left).
    expect(formatGrpcTimeout(123_456_789)).toBe('123456S');
    expect(formatGrpcTimeout(0.4)).toBe('0m');
    for (const ms of [1, 17.5, 999, 1_001, 65_432, 2 ** 31 - 1]) {
      const value = formatGrpcTimeout(ms);
      expect(value).toMatch(/^\d{1,8}[HMSm]$/);
      expect(parseGrpcTimeout(value)).toBeLessThanOrEqual(ms);
    }
  });
});
