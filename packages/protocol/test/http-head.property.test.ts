import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeRequestHead,
  decodeResponseHead,
  encodeRequestHead,
  encodeResponseHead,
  ProtocolError,
  parseHello,
  type RawHeaders,
  type RequestHead,
  type ResponseHead,
} from '../src/index.js';

const LIMIT = 1 << 20;

const char = (codes: fc.Arbitrary<number>) => codes.map((code) => String.fromCharCode(code));
/** RFC 9110 token characters: what methods and field names are made of. */
const tokenChar = fc.constantFrom(
  ..."!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
);
/** Field values as Node hands them over: visible ASCII, space, tab and obs-text (0x80-0xff) as latin1. */
const valueChar = fc.oneof(
  char(fc.integer({ min: 0x20, max: 0x7e })),
  fc.constant('\t'),
  char(fc.integer({ min: 0x80, max: 0xff })),
);

const method = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'PROPFIND'),
  fc.string({ unit: tokenChar, minLength: 1, maxLength: 30 }),
);
const pathSegment = fc
  .array(
    fc.oneof(
      fc.string({ unit: fc.constantFrom(..."abcxyzABC019-._~!$&'()*+,;=:@"), minLength: 1, maxLength: 6 }),
      fc.integer({ min: 0, max: 255 }).map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(''));
const target = fc
  .tuple(fc.array(pathSegment, { minLength: 1, maxLength: 5 }), fc.option(pathSegment, { nil: undefined }))
  .map(([segments, query]) => `/${segments.join('/')}${query === undefined ? '' : `?${query}`}`);

/** Names drawn partly from a small pool so repeats (Set-Cookie, mixed case) are common. */
const headerName = fc.oneof(
  fc.constantFrom('Set-Cookie', 'set-cookie', 'Host', 'X-Forwarded-For', 'Cookie', 'Via'),
  fc.string({ unit: tokenChar, minLength: 1, maxLength: 40 }),
);
const headerValue = fc.string({ unit: valueChar, maxLength: 200 });
const rawHeaders: fc.Arbitrary<RawHeaders> = fc
  .array(fc.tuple(headerName, headerValue), { maxLength: 30 })
  .map((pairs) => pairs.flat());

const requestHead: fc.Arbitrary<RequestHead> = fc.record({ method, target, headers: rawHeaders });
const responseHead: fc.Arbitrary<ResponseHead> = fc.record({
  status: fc.integer({ min: 100, max: 999 }),
  statusMessage: fc.string({ unit: valueChar, maxLength: 255 }),
  headers: rawHeaders,
});

function onlyProtocolErrors(run: () => unknown): void {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).code).toMatch(/^TUNNEL2_ERR_[A-Z_]+$/);
  }
}

describe('head properties', () => {
  it('request heads round-trip with order, case and duplicates intact', () => {
    fc.assert(
      fc.property(requestHead, (head) => {
        expect(decodeRequestHead(encodeRequestHead(head, LIMIT))).toEqual(head);
      }),
      { numRuns: 500 },
    );
  });

  it('response heads round-trip with order, case and duplicates intact', () => {
    fc.assert(
      fc.property(responseHead, (head) => {
        expect(decodeResponseHead(encodeResponseHead(head, LIMIT))).toEqual(head);
      }),
      { numRuns: 500 },
    );
  });

  it('u16 lengths at their bounds round-trip, and one past them is refused before anything is written', () => {
    // The u16 fields are written by hand, without Node's range check: a length of 0x10000 written unchecked
    // would wrap to 0 and turn the rest of the field into other headers.
    const around = fc.constantFrom(0, 1, 0xff, 0x100, 0x1_01, 0xff_fe, 0xff_ff, 0x1_00_00, 0x1_00_01);
    fc.assert(
      fc.property(around, fc.constantFrom('target', 'name', 'value', 'response value'), (length, field) => {
        const long = 'a'.repeat(length);
        const encode = (): Buffer =>
          field === 'target'
            ? encodeRequestHead({ method: 'GET', target: long, headers: [] }, LIMIT)
            : field === 'response value'
              ? encodeResponseHead({ status: 404, statusMessage: '', headers: ['X', long] }, LIMIT)
              : encodeRequestHead(
                  { method: 'GET', target: '/', headers: field === 'name' ? [`X${long}`, 'v'] : ['X', long] },
                  LIMIT,
                );
        const fieldLength = field === 'name' ? length + 1 : length;
        if (fieldLength > 0xff_ff) {
          expect(encode).toThrow(ProtocolError);
          return;
        }
        const bytes = encode();
        const decoded = field === 'response value' ? decodeResponseHead(bytes) : decodeRequestHead(bytes);
        const text = field === 'target' ? (decoded as RequestHead).target : decoded.headers.join('');
        expect(text.length).toBe(field === 'target' ? length : fieldLength + 1);
      }),
      { numRuns: 60 },
    );
  });

  it('raw headers that are not name/value pairs are refused, never written', () => {
    fc.assert(
      fc.property(rawHeaders, headerName, (headers, extra) => {
        const odd = [...headers, extra];
        expect(() => encodeRequestHead({ method: 'GET', target: '/', headers: odd }, LIMIT)).toThrow(
          ProtocolError,
        );
        expect(() => encodeResponseHead({ status: 200, statusMessage: '', headers: odd }, LIMIT)).toThrow(
          ProtocolError,
        );
      }),
      { numRuns: 200 },
    );
  });

  it('every strict prefix of a valid head is refused, and any payload accepted re-encodes to the same bytes', () => {
    // A read past the end that yielded 0 (or NaN) instead of failing would accept a cut head, or accept
    // bytes that do not say what was decoded from them.
    fc.assert(
      fc.property(
        fc.oneof(
          requestHead.map((h) => ({ bytes: encodeRequestHead(h, LIMIT), request: true })),
          responseHead.map((h) => ({ bytes: encodeResponseHead(h, LIMIT), request: false })),
        ),
        fc.nat(),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 3 }),
        ({ bytes, request }, cut, flips) => {
          const decode = request ? decodeRequestHead : decodeResponseHead;
          const prefix = bytes.subarray(0, cut % bytes.length);
          expect(() => decode(prefix)).toThrow(ProtocolError);
          const flipped = Buffer.from(bytes);
          for (const [where, value] of flips) flipped[where % flipped.length] = value;
          let head: RequestHead | ResponseHead;
          try {
            head = decode(flipped);
          } catch (error) {
            expect(error).toBeInstanceOf(ProtocolError);
            return;
          }
          const again = request
            ? encodeRequestHead(head as RequestHead, LIMIT)
            : encodeResponseHead(head as ResponseHead, LIMIT);
          expect(again).toEqual(flipped);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('garbage given to the head and HELLO parsers only ever throws ProtocolError', () => {
    const garbage = fc.oneof(
      fc.uint8Array({ maxLength: 400 }),
      // Valid encodings with bytes flipped or cut reach past the first length checks.
      fc
        .tuple(
          fc.oneof(
            requestHead.map((h) => encodeRequestHead(h, LIMIT)),
            responseHead.map((h) => encodeResponseHead(h, LIMIT)),
          ),
          fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
          fc.nat(),
        )
        .map(([bytes, flips, cut]) => {
          for (const [where, value] of flips) bytes[where % bytes.length] = value;
          return bytes.subarray(0, cut % (bytes.length + 1));
        }),
    );
    fc.assert(
      fc.property(garbage, (bytes) => {
        const payload = Buffer.from(bytes);
        onlyProtocolErrors(() => decodeRequestHead(payload));
        onlyProtocolErrors(() => decodeResponseHead(payload));
        onlyProtocolErrors(() => parseHello(payload));
      }),
      { numRuns: 2000 },
    );
  });
});
