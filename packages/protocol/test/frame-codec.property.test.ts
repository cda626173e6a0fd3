import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder, FrameType, ProtocolError } from '../src/index.js';
import { decodeChunks, type FrameData, frameData, splitAt } from './support/bytes.js';

const streamId = fc.integer({ min: 1, max: 0x7f_ff_ff_ff });
const flags = fc.integer({ min: 0, max: 0xff });
const body = (maxLength: number) => fc.uint8Array({ maxLength }).map((bytes) => Buffer.from(bytes));
const fixed = (length: number) =>
  fc.uint8Array({ minLength: length, maxLength: length }).map((bytes) => Buffer.from(bytes));

/** Any frame the decoder accepts: stream scope and fixed payload sizes respected per type. */
const validFrame: fc.Arbitrary<FrameData> = fc.oneof(
  fc.record({ type: fc.constant(FrameType.DATA), flags, streamId, payload: body(300) }),
  fc.record({ type: fc.constant(FrameType.HEADERS), flags, streamId, payload: body(300) }),
  fc.record({ type: fc.constant(FrameType.RESET), flags, streamId, payload: fixed(4) }),
  fc.record({
    type: fc.constant(FrameType.WINDOW_UPDATE),
    flags,
    streamId: fc.oneof(fc.constant(0), streamId),
    payload: fixed(4),
  }),
  fc.record({ type: fc.constant(FrameType.PING), flags, streamId: fc.constant(0), payload: fixed(8) }),
  fc.record({
    type: fc.constant(FrameType.GOAWAY),
    flags,
    streamId: fc.constant(0),
    payload: fc.tuple(fixed(8), body(40)).map(([head, reason]) => Buffer.concat([head, reason])),
  }),
  fc.record({ type: fc.constant(FrameType.HELLO), flags, streamId: fc.constant(0), payload: body(100) }),
);

const encode = (frames: readonly FrameData[]): Buffer =>
  Buffer.concat(frames.map((f) => encodeFrame(f.type, f.flags, f.streamId, f.payload)));

/** Split points as fractions, so they scale to whatever length the bytes end up having. */
const cutFractions = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 12 });
const toOffsets = (fractions: readonly number[], length: number): number[] =>
  fractions.map((f) => Math.floor(f * length));

describe('frame codec properties', () => {
  it('any list of valid frames round-trips through encode and a decoder fed random chunks', () => {
    fc.assert(
      fc.property(fc.array(validFrame, { maxLength: 20 }), cutFractions, (frames, fractions) => {
        const bytes = encode(frames);
        expect(decodeChunks(splitAt(bytes, toOffsets(fractions, bytes.length)), 300 + 40 + 8)).toEqual(
          frames,
        );
      }),
      { numRuns: 500 },
    );
  });

  it("any header's fields decode as Buffer's checked reads give them, or the frame is refused", () => {
    // The header is written here with Node's checked writers, an oracle for the decoder's hand-written reads:
    // a stream id is never negative or above 2^31 - 1 (the high bit is refused), a cut frame never emerges.
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 0xff }),
        flags,
        fc.integer({ min: 0, max: 0xff_ff_ff_ff }),
        body(40),
        cutFractions,
        fc.nat(),
        (type, frameFlags, idWord, payload, fractions, cut) => {
          const bytes = Buffer.alloc(9 + payload.length);
          bytes.writeUIntBE(payload.length, 0, 3);
          bytes.writeUInt8(type, 3);
          bytes.writeUInt8(frameFlags, 4);
          bytes.writeUInt32BE(idWord, 5);
          payload.copy(bytes, 9);
          const frames: FrameData[] = [];
          const decoder = new FrameDecoder({ maxFrameSize: 40, onFrame: (f) => frames.push(frameData(f)) });
          const input = bytes.subarray(0, cut % (bytes.length + 1));
          let failure: unknown;
          try {
            for (const chunk of splitAt(input, toOffsets(fractions, input.length))) decoder.push(chunk);
          } catch (error) {
            failure = error;
          }
          if (failure !== undefined) {
            expect(failure).toBeInstanceOf(ProtocolError);
            return;
          }
          // A whole header with the reserved high bit is refused from the header alone.
          if (input.length >= 9) expect(idWord).toBeLessThanOrEqual(0x7f_ff_ff_ff);
          if (input.length < bytes.length) {
            // Cut short: nothing handed on, the partial frame held.
            expect(frames).toEqual([]);
            expect(decoder.idle).toBe(input.length === 0);
            return;
          }
          // A known type is handed on whole; an unknown one is skipped.
          const known = (Object.values(FrameType) as number[]).includes(type);
          expect(frames).toEqual(known ? [{ type, flags: frameFlags, streamId: idWord, payload }] : []);
          expect(decoder.idle).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('garbage fed in random chunks yields frames or one ProtocolError, never another exception', () => {
    // Garbage that is mostly valid frames with a few bytes flipped reaches deeper than pure noise.
    const mutated = fc
      .tuple(
        fc.array(validFrame, { minLength: 1, maxLength: 8 }),
        fc.array(
          fc.tuple(
            fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
            fc.integer({ min: 0, max: 255 }),
          ),
          {
            maxLength: 6,
          },
        ),
      )
      .map(([frames, flips]) => {
        const bytes = encode(frames);
        for (const [where, value] of flips) bytes[Math.floor(where * bytes.length)] = value;
        return bytes;
      });
    const garbage = fc.oneof(
      fc.uint8Array({ maxLength: 2000 }).map((bytes) => Buffer.from(bytes)),
      mutated,
    );
    fc.assert(
      fc.property(
        garbage,
        cutFractions,
        fc.integer({ min: 0, max: 4096 }),
        (bytes, fractions, maxFrameSize) => {
          const frames: FrameData[] = [];
          const decoder = new FrameDecoder({ maxFrameSize, onFrame: (f) => frames.push(frameData(f)) });
          let failure: unknown;
          for (const chunk of splitAt(bytes, toOffsets(fractions, bytes.length))) {
            try {
              decoder.push(chunk);
            } catch (error) {
              failure = error;
              break;
            }
          }
          if (failure === undefined) {
            for (const frame of frames) expect(frame.payload.length).toBeLessThanOrEqual(maxFrameSize);
            return;
          }
          expect(failure).toBeInstanceOf(ProtocolError);
          expect((failure as ProtocolError).code).toMatch(/^TUNNEL2_ERR_[A-Z_]+$/);
          // Once failed, the decoder refuses everything with the same error.
          expect(() => decoder.push(Buffer.alloc(1))).toThrow(failure as Error);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
