import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeRequestHead,
  decodeResponseHead,
  ErrorCode,
  encodeRequestHead,
  encodeResponseHead,
  ProtocolError,
  ProtocolErrorCode,
  type RequestHead,
  type ResponseHead,
} from '../src/index.js';
import { hex } from './support/bytes.js';

const LIMIT = 64 * 1024;

const request: RequestHead = {
  method: 'GET',
  target: '/a?b=%20',
  headers: ['Host', 'x', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'],
};
// method (u8 len + bytes), target (u16 len + bytes), count u16, then 2 × (u16 len + bytes) per header.
const requestBytes = hex(`
  03 474554
  0008 2f613f623d253230
  0003
  0004 486f7374 0001 78
  000a 5365742d436f6f6b6965 0003 613d31
  000a 5365742d436f6f6b6965 0003 623d32
`);

const response: ResponseHead = { status: 200, statusMessage: 'OK', headers: ['Content-Length', '0'] };
// status u16, reason (u8 len + bytes), headers as above.
const responseBytes = hex('00c8 02 4f4b 0001 000e 436f6e74656e742d4c656e677468 0001 30');

function caught(run: () => unknown): ProtocolError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error('expected a ProtocolError, nothing was thrown');
}

describe('request head', () => {
  it('encodes to the golden bytes and decodes back', () => {
    expect(encodeRequestHead(request, LIMIT)).toEqual(requestBytes);
    expect(decodeRequestHead(requestBytes)).toEqual(request);
  });

  it('keeps header case, order and repeated names', () => {
    const head: RequestHead = {
      method: 'POST',
      target: '/',
      headers: ['x-B', '2', 'X-a', '1', 'x-b', '3', 'COOKIE', 'c=1', 'Cookie', 'c=2'],
    };
    expect(decodeRequestHead(encodeRequestHead(head, LIMIT))).toEqual(head);
  });

  it('carries latin1 bytes one to one', () => {
    const head: RequestHead = {
      method: 'GET',
      target: '/caf\u00e9',
      headers: ['X-Name', 'caf\u00e9 \u00ff'],
    };
    const bytes = encodeRequestHead(head, LIMIT);
    expect(bytes.includes(hex('0005 2f636166e9'))).toBe(true);
    expect(bytes.includes(hex('0006 636166e920ff'))).toBe(true);
    expect(decodeRequestHead(bytes)).toEqual(head);
  });

  it('handles no headers and an empty target', () => {
    const head: RequestHead = { method: 'OPTIONS', target: '', headers: [] };
    expect(encodeRequestHead(head, LIMIT)).toEqual(hex('07 4f5054494f4e53 0000 0000'));
    expect(decodeRequestHead(hex('07 4f5054494f4e53 0000 0000'))).toEqual(head);
  });

  it('refuses an empty or over-long method', () => {
    expect(caught(() => encodeRequestHead({ ...request, method: '' }, LIMIT)).code).toBe(
      ProtocolErrorCode.MALFORMED_HEAD,
    );
    expect(caught(() => encodeRequestHead({ ...request, method: 'M'.repeat(256) }, LIMIT)).code).toBe(
      ProtocolErrorCode.MALFORMED_HEAD,
    );
    expect(caught(() => decodeRequestHead(hex('00 0000 0000'))).code).toBe(ProtocolErrorCode.MALFORMED_HEAD);
  });

  it('refuses headers that are not name/value pairs', () => {
    expect(caught(() => encodeRequestHead({ ...request, headers: ['Host'] }, LIMIT)).code).toBe(
      ProtocolErrorCode.MALFORMED_HEAD,
    );
  });

  it('enforces the head limit with HEADERS_TOO_LARGE', () => {
    const error = caught(() => encodeRequestHead(request, requestBytes.length - 1));
    expect(error.code).toBe(ProtocolErrorCode.HEAD_TOO_LARGE);
    expect(error.protocolCode).toBe(ErrorCode.HEADERS_TOO_LARGE);
    expect(encodeRequestHead(request, requestBytes.length)).toEqual(requestBytes);
  });

  it('refuses fields longer than their u16 length', () => {
    const long = 'v'.repeat(0x1_00_00);
    expect(caught(() => encodeRequestHead({ ...request, target: long }, 1 << 20)).code).toBe(
      ProtocolErrorCode.HEAD_TOO_LARGE,
    );
    expect(caught(() => encodeRequestHead({ ...request, headers: ['X', long] }, 1 << 20)).code).toBe(
      ProtocolErrorCode.HEAD_TOO_LARGE,
    );
    expect(caught(() => encodeRequestHead({ ...request, headers: [long, 'x'] }, 1 << 20)).code).toBe(
      ProtocolErrorCode.HEAD_TOO_LARGE,
    );
  });

  it('rejects every truncation of a valid head', () => {
    for (let end = 0; end < requestBytes.length; end++) {
      const error = caught(() => decodeRequestHead(requestBytes.subarray(0, end)));
      expect(error.code).toBe(ProtocolErrorCode.MALFORMED_HEAD);
      expect(error.protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    }
  });

  it('rejects trailing bytes', () => {
    expect(caught(() => decodeRequestHead(Buffer.concat([requestBytes, hex('00')]))).code).toBe(
      ProtocolErrorCode.MALFORMED_HEAD,
    );
  });
});

describe('response head', () => {
  it('encodes to the golden bytes and decodes back', () => {
    expect(encodeResponseHead(response, LIMIT)).toEqual(responseBytes);
    expect(decodeResponseHead(responseBytes)).toEqual(response);
  });

  it('keeps repeated Set-Cookie headers in order', () => {
    const head: ResponseHead = {
      status: 302,
      statusMessage: 'Found',
      headers: ['Set-Cookie', 'a=1; Path=/', 'Location', '/x', 'set-cookie', 'b=2'],
    };
    expect(decodeResponseHead(encodeResponseHead(head, LIMIT))).toEqual(head);
  });

  it('accepts an empty reason and statuses from 100 to 999', () => {
    for (const status of [100, 101, 204, 599, 999]) {
      const head: ResponseHead = { status, statusMessage: '', headers: [] };
      expect(decodeResponseHead(encodeResponseHead(head, LIMIT))).toEqual(head);
    }
  });

  it('refuses a status outside 100..999 on both sides', () => {
    for (const status of [0, 99, 1000, 200.5]) {
      expect(caught(() => encodeResponseHead({ ...response, status }, LIMIT)).code).toBe(
        ProtocolErrorCode.MALFORMED_HEAD,
      );
    }
    expect(caught(() => decodeResponseHead(hex('0063 00 0000'))).code).toBe(ProtocolErrorCode.MALFORMED_HEAD);
    expect(caught(() => decodeResponseHead(hex('03e8 00 0000'))).code).toBe(ProtocolErrorCode.MALFORMED_HEAD);
  });

  it('cuts a reason longer than 255 bytes instead of failing', () => {
    const head: ResponseHead = { status: 200, statusMessage: 'r'.repeat(300), headers: [] };
    expect(decodeResponseHead(encodeResponseHead(head, LIMIT)).statusMessage).toBe('r'.repeat(255));
  });

  it('enforces the head limit', () => {
    const error = caught(() => encodeResponseHead(response, responseBytes.length - 1));
    expect(error.code).toBe(ProtocolErrorCode.HEAD_TOO_LARGE);
    expect(error.protocolCode).toBe(ErrorCode.HEADERS_TOO_LARGE);
  });

  it('rejects every truncation of a valid head', () => {
    for (let end = 0; end < responseBytes.length; end++) {
      expect(caught(() => decodeResponseHead(responseBytes.subarray(0, end))).code).toBe(
        ProtocolErrorCode.MALFORMED_HEAD,
      );
    }
  });
});

describe('header names decoded lately are reused', () => {
  it('gives the same string for the same bytes, and never one of other bytes (case, one byte, same slot)', () => {
    // Names of one length with the same first and last bytes share a slot: each must still decode as itself.
    const names = [
      'X-Forwarded-For',
      'x-forwarded-for',
      'X-Forwarded-Fox',
      'XaForwardedbFor',
      'Host',
      'host',
    ];
    const heads = [0, 1, 2].map(() => names.flatMap((name, i) => [name, `v${i}`]));
    const decoded = heads.map(
      (headers) =>
        decodeRequestHead(encodeRequestHead({ method: 'GET', target: '/', headers }, 1 << 16)).headers,
    );
    for (const headers of decoded) expect(headers).toEqual(heads[0]);
    // Alternating names of one slot, each time the other: every decode reads its own bytes.
    for (let round = 0; round < 4; round++) {
      const name = round % 2 === 0 ? 'X-Forwarded-For' : 'X-Forwarded-Fox';
      const payload = encodeResponseHead({ status: 200, statusMessage: '', headers: [name, 'a'] }, 1 << 16);
      expect(decodeResponseHead(payload).headers).toEqual([name, 'a']);
    }
    const long = `x-${'a'.repeat(60)}`;
    const payload = encodeResponseHead(
      { status: 200, statusMessage: '', headers: [long, '1', '', '2'] },
      1 << 16,
    );
    expect(decodeResponseHead(payload).headers).toEqual([long, '1', '', '2']);
  });
});

describe('header names decoded lately are reused, hostile names', () => {
  // Names built to share a slot (one length, one first and one last byte) and to differ only where a loose
  // compare would not look: the case of a middle letter, a latin1 byte beyond 0x7f against its other case
  // or its ASCII neighbour 0x80 below. Every head, request or response, must decode to exactly its bytes,
  // whatever the heads before it left in the cache.
  const middle = fc.constantFrom(...'aAfF-_\x80\xc0\xe0\xc5\xe5\xd7\xf7\xff\x00\x7f');
  const name = fc.oneof(
    fc.string({ unit: middle, minLength: 1, maxLength: 6 }).map((m) => `X${m}r`),
    fc.string({ unit: middle, minLength: 36, maxLength: 44 }).map((m) => `x${m}R`),
    fc.constantFrom('X-Forwarded-For', 'X-FORWARDED-For', 'X-forwarded-For', 'Xr', 'XAr', 'Xar', ''),
  );
  const heads = fc.array(fc.array(name, { maxLength: 6 }), { minLength: 2, maxLength: 8 });

  it('never gives a string of other bytes', () => {
    fc.assert(
      fc.property(heads, fc.boolean(), (list, request) => {
        for (const names of list) {
          const headers = names.flatMap((n, i) => [n, String(i)]);
          const decoded = request
            ? decodeRequestHead(encodeRequestHead({ method: 'GET', target: '/', headers }, 1 << 16)).headers
            : decodeResponseHead(encodeResponseHead({ status: 200, statusMessage: '', headers }, 1 << 16))
                .headers;
          expect(decoded).toEqual(headers);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
