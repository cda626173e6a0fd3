import { describe, expect, it } from 'vitest';
import {
  decodeRequestHead,
  decodeTunnelTag,
  encodeRequestHead,
  encodeTcpHead,
  encodeTunnelTag,
  ProtocolError,
  ProtocolErrorCode,
} from '../src/index.js';
import { hex } from './support/bytes.js';

// `GET /a` with `Host: x`, for the session's 2nd listed tunnel: 00 02, index u16, then the request head.
const golden = hex(`
  00 02 0002
  03 474554
  0002 2f61
  0001 0004 486f7374 0001 78
`);

describe('tunnel tag', () => {
  it('encodes to the golden bytes and back', () => {
    const head = { method: 'GET', target: '/a', headers: ['Host', 'x'] };
    expect(encodeTunnelTag(2, encodeRequestHead(head, 65_536))).toEqual(golden);
    const decoded = decodeTunnelTag(golden);
    expect(decoded.index).toBe(2);
    expect(decodeRequestHead(decoded.head)).toEqual(head);
  });

  it('leaves an untagged request head or TCP head to the session tunnel (index 0)', () => {
    const request = encodeRequestHead({ method: 'GET', target: '/', headers: [] }, 65_536);
    expect(decodeTunnelTag(request)).toEqual({ index: 0, head: request });
    const tcp = encodeTcpHead({ port: 20000, clientAddress: '127.0.0.1', clientPort: 1 });
    expect(decodeTunnelTag(tcp)).toEqual({ index: 0, head: tcp });
  });

  it('wraps a TCP head the same way', () => {
    const tcp = encodeTcpHead({ port: 20000, clientAddress: '127.0.0.1', clientPort: 1 });
    const tagged = encodeTunnelTag(1, tcp);
    expect(tagged.subarray(0, 4)).toEqual(hex('00 02 0001'));
    expect(decodeTunnelTag(tagged).head).toEqual(tcp);
  });

  it('refuses a truncated tag, index 0, and an index out of range', () => {
    for (const bad of [hex('00 02'), hex('00 02 00'), hex('00 02 0000 03474554')]) {
      expect(() => decodeTunnelTag(bad)).toThrow(ProtocolError);
      try {
        decodeTunnelTag(bad);
      } catch (err) {
        expect((err as ProtocolError).code).toBe(ProtocolErrorCode.MALFORMED_HEAD);
      }
    }
    expect(() => encodeTunnelTag(0, Buffer.alloc(0))).toThrow(ProtocolError);
    expect(() => encodeTunnelTag(0x1_00_00, Buffer.alloc(0))).toThrow(ProtocolError);
  });
});
