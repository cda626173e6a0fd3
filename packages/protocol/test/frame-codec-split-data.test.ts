import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeFrame, FRAME_HEADER_SIZE, FrameDecoder, FrameFlags, FrameType } from '../src/index.js';
import { type FrameData, frameData, splitAt } from './support/bytes.js';

const streamId = fc.integer({ min: 1, max: 0x7f_ff_ff_ff });
const flags = fc.integer({ min: 0, max: 0xff });
const body = (maxLength: number) => fc.uint8Array({ maxLength }).map((bytes) => Buffer.from(bytes));
const frame: fc.Arbitrary<FrameData> = fc.oneof(
  fc.record({ type: fc.constant(FrameType.DATA), flags, streamId, payload: body(300) }),
  fc.record({ type: fc.constant(FrameType.HEADERS), flags, streamId, payload: body(100) }),
  fc.record({ type: fc.constant(FrameType.PING), flags, streamId: fc.constant(0), payload: body(8) }),
);
const valid = (f: FrameData): boolean => f.type !== FrameType.PING || f.payload.length === 8;

function decodeSplit(chunks: readonly Buffer[]): FrameData[] {
  const out: FrameData[] = [];
  const decoder = new FrameDecoder({
    maxFrameSize: 0xff_ff,
    splitData: true,
    onFrame: (f) => out.push(frameData(f)),
  });
  for (const chunk of chunks) decoder.push(chunk);
  expect(decoder.idle).toBe(true);
  return out;
}

/**
 * What splitData must hand on: every frame whole, except a DATA payload cut by a chunk boundary, which
 * comes as one piece per chunk it touches (none empty), END_STREAM kept only on the last.
 */
function expected(frames: readonly FrameData[], cuts: readonly number[]): FrameData[] {
  const out: FrameData[] = [];
  let at = 0;
  for (const f of frames) {
    const start = at + FRAME_HEADER_SIZE;
    at = start + f.payload.length;
    const inside = cuts.filter((c) => c > start && c < at).map((c) => c - start);
    if (f.type !== FrameType.DATA || inside.length === 0) {
      out.push(f);
      continue;
    }
    const bounds = [...new Set(inside)].sort((a, b) => a - b);
    let from = 0;
    for (const to of [...bounds, f.payload.length]) {
      const last = to === f.payload.length;
      const pieceFlags = last ? f.flags : f.flags & ~FrameFlags.END_STREAM;
      out.push({ ...f, flags: pieceFlags, payload: f.payload.subarray(from, to) });
      from = to;
    }
  }
  return out;
}

const encode = (frames: readonly FrameData[]): Buffer =>
  Buffer.concat(frames.map((f) => encodeFrame(f.type, f.flags, f.streamId, f.payload)));

describe('frame decoder with splitData (a message received as WebSocket fragments)', () => {
  it('a DATA frame cut at every offset comes as two views whose bytes and END_STREAM match the frame', () => {
    const payload = Buffer.from(Array.from({ length: 40 }, (_, i) => i));
    const frames: FrameData[] = [
      { type: FrameType.DATA, flags: FrameFlags.END_STREAM, streamId: 3, payload },
      { type: FrameType.HEADERS, flags: 0, streamId: 5, payload: Buffer.from('head') },
    ];
    const bytes = encode(frames);
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(decodeSplit(splitAt(bytes, [cut]))).toEqual(expected(frames, [cut]));
    }
  });

  it('pieces are views of the chunks, not copies', () => {
    const bytes = encode([{ type: FrameType.DATA, flags: 0, streamId: 1, payload: Buffer.alloc(100, 1) }]);
    const chunks = splitAt(bytes, [50]);
    const views: Buffer[] = [];
    const decoder = new FrameDecoder({
      maxFrameSize: 1000,
      splitData: true,
      onFrame: (f) => views.push(f.payload),
    });
    for (const chunk of chunks) decoder.push(chunk);
    expect(views.map((v) => v.buffer)).toEqual(chunks.map((c) => c.buffer));
    expect(views.map((v) => v.byteOffset)).toEqual([chunks[0]!.byteOffset + 9, chunks[1]!.byteOffset]);
  });

  it('any frames fed in any pieces decode to the model: whole frames, DATA in per-chunk pieces', () => {
    fc.assert(
      fc.property(
        fc.array(frame.filter(valid), { maxLength: 12 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 16 }),
        (frames, fractions) => {
          const bytes = encode(frames);
          const cuts = fractions.map((f) => Math.floor(f * bytes.length));
          expect(decodeSplit(splitAt(bytes, cuts))).toEqual(expected(frames, cuts));
        },
      ),
      { numRuns: 500 },
    );
  });
});
