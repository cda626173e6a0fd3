import { describe, expect, it } from 'vitest';
import {
  ANY_TCP_PORT,
  decodeRequestHead,
  decodeTcpHead,
  ErrorCode,
  encodeTcpHead,
  ProtocolError,
  ProtocolErrorCode,
  tcpPortOfParam,
} from '../src/index.js';
import { hex } from './support/bytes.js';

// 00 (no method), kind 01, port u16, address (u8 len + bytes), client port u16.
const golden = hex(`
  00 01
  4e20
  09 3132372e302e302e31
  d431
`);

describe('TCP stream head', () => {
  it('encodes to the golden bytes and back', () => {
    const head = { port: 20000, clientAddress: '127.0.0.1', clientPort: 54321 };
    expect(encodeTcpHead(head)).toEqual(golden);
    expect(decodeTcpHead(golden)).toEqual(head);
  });

  it('round-trips an IPv6 client address', () => {
    const head = { port: 65535, clientAddress: '2001:db8::1', clientPort: 1 };
    expect(decodeTcpHead(encodeTcpHead(head))).toEqual(head);
  });

  it('is refused as a malformed request head by an agent that predates TCP streams', () => {
    // What an older agent does with the first HEADERS of a stream: decode a request head.
    expect(() => decodeRequestHead(golden)).toThrow(
      expect.objectContaining({
        code: ProtocolErrorCode.MALFORMED_HEAD,
        protocolCode: ErrorCode.PROTOCOL_ERROR,
      }),
    );
  });

  it('refuses every truncation and trailing bytes with one typed error', () => {
    for (let end = 0; end < golden.length; end++) {
      expect(() => decodeTcpHead(golden.subarray(0, end))).toThrow(ProtocolError);
    }
    expect(() => decodeTcpHead(Buffer.concat([golden, Buffer.from([0])]))).toThrow(ProtocolError);
  });

  it('does not take a request head for a TCP head', () => {
    expect(() => decodeTcpHead(Buffer.from([3, 0x47, 0x45, 0x54]))).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.MALFORMED_HEAD, message: 'not a TCP stream head' }),
    );
  });
});

describe('the port a tcp= parameter asks for', () => {
  it('is any free one for `any`, that port for digits, and NaN for anything else', () => {
    expect(tcpPortOfParam(ANY_TCP_PORT)).toBeUndefined();
    expect(tcpPortOfParam('20000')).toBe(20000);
    expect(tcpPortOfParam('0')).toBe(0);
    for (const bad of ['', 'ANY', '-1', '1e3', '123456', ' 80']) expect(tcpPortOfParam(bad)).toBeNaN();
  });
});
