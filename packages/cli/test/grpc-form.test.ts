import { encodeGrpcMessage, grpcStatusOfHttp, isGrpcContentType } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';

// PROTOCOL.md §13, gRPC requests and the gRPC form.

describe('the gRPC form', () => {
  it('knows a gRPC content type in any case and with a suffix or parameters, and nothing else', () => {
    for (const yes of [
      'application/grpc',
      'Application/GRPC',
      'application/grpc+proto',
      'application/grpc; x=1',
    ])
      expect(isGrpcContentType(yes)).toBe(true);
    for (const no of ['application/grpc-web', 'application/grpcx', 'application/json', ''])
      expect(isGrpcContentType(no)).toBe(false);
  });

  it('maps HTTP statuses as gRPC does', () => {
    const table: [number, number][] = [
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
      [418, 2],
    ];
    for (const [http, grpc] of table) expect(grpcStatusOfHttp(http)).toBe(grpc);
  });

  it('percent-encodes grpc-message: bytes outside 0x20-0x7E and % as %XX, UTF-8 first', () => {
    expect(encodeGrpcMessage('plain text, ok')).toBe('plain text, ok');
    expect(encodeGrpcMessage('100% sure')).toBe('100%25 sure');
    expect(encodeGrpcMessage('café\n')).toBe('caf%C3%A9%0A');
    expect(decodeURIComponent(encodeGrpcMessage('no such thing ✓'))).toBe('no such thing ✓');
  });
});
