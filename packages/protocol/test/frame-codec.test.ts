import { describe, expect, it } from 'vitest';
import {
  decodeFrames,
  ErrorCode,
  encodeFrame,
  encodeGoAway,
  encodeReset,
  encodeWindowUpdate,
  FRAME_HEADER_SIZE,
  type Frame,
  FrameDecoder,
  FrameFlags,
  FrameType,
  ProtocolError,
  ProtocolErrorCode,
} from '../src/index.js';
import { decodeChunks, type FrameData, frameData, hex, splitAt } from './support/bytes.js';

/** Hand-written from the layout: length u24 BE, type u8, flags u8, stream id u32 BE, payload. */
const golden: { name: string; frame: FrameData; bytes: Buffer }[] = [
  {
    name: 'DATA with END_STREAM',
    frame: { type: FrameType.DATA, flags: FrameFlags.END_STREAM, streamId: 1, payload: Buffer.from('hi') },
    bytes: hex('000002 00 01 00000001 6869'),
  },
  {
    name: 'empty DATA with END_STREAM',
    frame: { type: FrameType.DATA, flags: FrameFlags.END_STREAM, streamId: 2, payload: Buffer.alloc(0) },
    bytes: hex('000000 00 01 00000002'),
  },
  {
    name: 'HEADERS on the highest stream id',
    frame: { type: FrameType.HEADERS, flags: 0, streamId: 0x7f_ff_ff_ff, payload: hex('aabb') },
    bytes: hex('000002 01 00 7fffffff aabb'),
  },
  {
    name: 'RESET with CANCEL',
    frame: { type: FrameType.RESET, flags: 0, streamId: 5, payload: hex('00000007') },
    bytes: hex('000004 02 00 00000005 00000007'),
  },
  {
    name: 'WINDOW_UPDATE for the session',
    frame: { type: FrameType.WINDOW_UPDATE, flags: 0, streamId: 0, payload: hex('00010000') },
    bytes: hex('000004 03 00 00000000 00010000'),
  },
  {
    name: 'PING with ACK',
    frame: { type: FrameType.PING, flags: FrameFlags.ACK, streamId: 0, payload: hex('0001020304050607') },
    bytes: hex('000008 04 01 00000000 0001020304050607'),
  },
  {
    name: 'GOAWAY with a reason',
    frame: { type: FrameType.GOAWAY, flags: 0, streamId: 0, payload: hex('00000007 0000000d 627965') },
    bytes: hex('00000b 05 00 00000000 00000007 0000000d 627965'),
  },
  {
    name: 'HELLO with ACK',
    frame: { type: FrameType.HELLO, flags: FrameFlags.ACK, streamId: 0, payload: hex('0001 0001 0000') },
    bytes: hex('000006 06 01 00000000 0001 0001 0000'),
  },
];

const allGoldenBytes = Buffer.concat(golden.map((g) => g.bytes));
const allGoldenFrames = golden.map((g) => g.frame);

function expectProtocolError(
  run: () => unknown,
  code: ProtocolErrorCode,
  protocolCode?: number,
): ProtocolError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ProtocolError);
  const error = caught as ProtocolError;
  expect(error.code).toBe(code);
  if (protocolCode !== undefined) expect(error.protocolCode).toBe(protocolCode);
  return error;
}

describe('frame encoding', () => {
  it.each(golden)('$name encodes to the golden bytes', ({ frame, bytes }) => {
    expect(encodeFrame(frame.type, frame.flags, frame.streamId, frame.payload)).toEqual(bytes);
  });

  it.each(golden)('$name decodes from the golden bytes', ({ frame, bytes }) => {
    expect(decodeFrames(bytes).map(frameData)).toEqual([frame]);
  });

  it('control-frame helpers produce the golden bytes', () => {
    expect(encodeReset(5, ErrorCode.CANCEL)).toEqual(hex('000004 02 00 00000005 00000007'));
    expect(encodeWindowUpdate(0, 65536)).toEqual(hex('000004 03 00 00000000 00010000'));
    expect(encodeGoAway({ lastStreamId: 7, code: ErrorCode.GOING_AWAY, reason: 'bye' })).toEqual(
      hex('00000b 05 00 00000000 00000007 0000000d 627965'),
    );
  });

  it('encodes a payload given as a plain Uint8Array', () => {
    expect(encodeFrame(FrameType.DATA, 0, 3, new Uint8Array([1, 2, 3]))).toEqual(
      hex('000003 00 00 00000003 010203'),
    );
  });

  it('writes a 24-bit length big-endian', () => {
    const payload = Buffer.alloc(0x01_02_03);
    const bytes = encodeFrame(FrameType.DATA, 0, 1, payload);
    expect(bytes.subarray(0, FRAME_HEADER_SIZE)).toEqual(hex('010203 00 00 00000001'));
    expect(bytes.length).toBe(FRAME_HEADER_SIZE + 0x01_02_03);
  });

  it('refuses a payload the length field cannot express', () => {
    const payload = new Uint8Array(0x1_00_00_00);
    expectProtocolError(
      () => encodeFrame(FrameType.DATA, 0, 1, payload),
      ProtocolErrorCode.FRAME_TOO_LARGE,
      ErrorCode.FRAME_SIZE_ERROR,
    );
  });
});

describe('frame decoding across chunk boundaries', () => {
  it('decodes all golden frames from one buffer', () => {
    expect(decodeChunks([allGoldenBytes])).toEqual(allGoldenFrames);
  });

  it('gives identical frames when the input is split at every single offset', () => {
    for (let cut = 0; cut <= allGoldenBytes.length; cut++) {
      expect(decodeChunks(splitAt(allGoldenBytes, [cut])), `split at ${cut}`).toEqual(allGoldenFrames);
    }
  });

  it('gives identical frames when every pair of offsets splits the input', () => {
    for (let a = 0; a <= allGoldenBytes.length; a++) {
      for (let b = a; b <= allGoldenBytes.length; b++) {
        expect(decodeChunks(splitAt(allGoldenBytes, [a, b]))).toEqual(allGoldenFrames);
      }
    }
  });

  it('decodes one byte at a time', () => {
    const chunks = [...allGoldenBytes].map((byte) => Uint8Array.of(byte));
    expect(decodeChunks(chunks)).toEqual(allGoldenFrames);
  });

  it('accepts empty chunks anywhere', () => {
    const empty = Buffer.alloc(0);
    const [a, b] = splitAt(allGoldenBytes, [4]);
    expect(decodeChunks([empty, a!, empty, empty, b!, empty])).toEqual(allGoldenFrames);
  });

  it('hands on the same frames as fields (onFrameFields) at every split offset, split DATA included', () => {
    for (const splitData of [false, true]) {
      for (let cut = 0; cut <= allGoldenBytes.length; cut++) {
        const objects: Frame[] = [];
        const fields: Frame[] = [];
        const byObject = new FrameDecoder({ maxFrameSize: 1024, splitData, onFrame: (f) => objects.push(f) });
        const byFields = new FrameDecoder({
          maxFrameSize: 1024,
          splitData,
          // Given both, the decoder calls only onFrameFields.
          onFrame: () => expect.unreachable('onFrame with onFrameFields given'),
          onFrameFields: (type, flags, streamId, payload) => fields.push({ type, flags, streamId, payload }),
        });
        for (const piece of splitAt(allGoldenBytes, [cut])) {
          byObject.push(piece);
          byFields.push(piece);
        }
        expect(fields, `split at ${cut}`).toEqual(objects);
      }
    }
    expect(() => new FrameDecoder({ maxFrameSize: 1024 })).toThrow(TypeError);
  });

  it('hands on whole frames as views of the chunk, without copying', () => {
    const seen: Frame[] = [];
    const decoder = new FrameDecoder({ maxFrameSize: 1024, onFrame: (f) => seen.push(f) });
    decoder.push(allGoldenBytes);
    expect(seen[0]!.payload.buffer).toBe(allGoldenBytes.buffer);
  });

  it('reports idle only on a frame boundary', () => {
    const decoder = new FrameDecoder({ maxFrameSize: 1024, onFrame: () => {} });
    expect(decoder.idle).toBe(true);
    decoder.push(golden[0]!.bytes.subarray(0, 4));
    expect(decoder.idle).toBe(false);
    decoder.push(golden[0]!.bytes.subarray(4, 10));
    expect(decoder.idle).toBe(false);
    decoder.push(golden[0]!.bytes.subarray(10));
    expect(decoder.idle).toBe(true);
  });

  it('decodeFrames rejects input that ends inside a frame', () => {
    expectProtocolError(
      () => decodeFrames(allGoldenBytes.subarray(0, 12)),
      ProtocolErrorCode.MALFORMED_FRAME,
    );
  });
});

describe('frame limits and checks', () => {
  it('rejects a frame over maxFrameSize from its header alone, before the payload is buffered', () => {
    const frames: Frame[] = [];
    const decoder = new FrameDecoder({ maxFrameSize: 16, onFrame: (f) => frames.push(f) });
    // Only the header of a 17-byte DATA frame: nothing of the payload has arrived yet.
    expectProtocolError(
      () => decoder.push(hex('000011 00 00 00000001')),
      ProtocolErrorCode.FRAME_TOO_LARGE,
      ErrorCode.FRAME_SIZE_ERROR,
    );
    expect(frames).toEqual([]);
  });

  it('rejects an oversized header that arrives split', () => {
    const decoder = new FrameDecoder({ maxFrameSize: 16, onFrame: () => {} });
    decoder.push(hex('ffff'));
    expectProtocolError(() => decoder.push(hex('ff 00 00 00000001')), ProtocolErrorCode.FRAME_TOO_LARGE);
  });

  it('accepts a frame of exactly maxFrameSize', () => {
    const bytes = encodeFrame(FrameType.DATA, 0, 1, Buffer.alloc(16, 7));
    expect(decodeChunks(splitAt(bytes, [3, 12]), 16)).toEqual([
      { type: FrameType.DATA, flags: 0, streamId: 1, payload: Buffer.alloc(16, 7) },
    ]);
  });

  it('skips unknown frame types, whatever their stream id, and keeps going', () => {
    const unknown = encodeFrame(0x3f, 0xff, 9, Buffer.from('future'));
    const bytes = Buffer.concat([golden[0]!.bytes, unknown, hex('000000 7f 00 00000000'), golden[1]!.bytes]);
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(decodeChunks(splitAt(bytes, [cut]))).toEqual([golden[0]!.frame, golden[1]!.frame]);
    }
  });

  it('still applies the size limit to unknown frame types', () => {
    expectProtocolError(
      () => decodeFrames(encodeFrame(0x3f, 0, 0, Buffer.alloc(17)), 16),
      ProtocolErrorCode.FRAME_TOO_LARGE,
    );
  });

  it.each([
    ['DATA', FrameType.DATA],
    ['HEADERS', FrameType.HEADERS],
    ['RESET', FrameType.RESET],
  ])('rejects %s on stream 0', (_name, type) => {
    const payload = type === FrameType.RESET ? Buffer.alloc(4) : Buffer.alloc(1);
    expectProtocolError(
      () => decodeFrames(encodeFrame(type, 0, 0, payload)),
      ProtocolErrorCode.MALFORMED_FRAME,
      ErrorCode.PROTOCOL_ERROR,
    );
  });

  it.each([
    ['PING', FrameType.PING, 8],
    ['GOAWAY', FrameType.GOAWAY, 8],
    ['HELLO', FrameType.HELLO, 6],
    ['NOTICE', FrameType.NOTICE, 2],
  ])('rejects %s on a stream other than 0', (_name, type, size) => {
    expectProtocolError(
      () => decodeFrames(encodeFrame(type, 0, 1, Buffer.alloc(size))),
      ProtocolErrorCode.MALFORMED_FRAME,
    );
  });

  it('allows WINDOW_UPDATE on stream 0 and on a stream', () => {
    expect(decodeFrames(encodeWindowUpdate(0, 1))).toHaveLength(1);
    expect(decodeFrames(encodeWindowUpdate(3, 1))).toHaveLength(1);
  });

  it('rejects a stream id with the reserved high bit', () => {
    expectProtocolError(
      () => decodeFrames(hex('000001 00 00 80000001 00')),
      ProtocolErrorCode.MALFORMED_FRAME,
    );
  });

  it.each([
    ['RESET', FrameType.RESET, 1, [0, 3, 5]],
    ['WINDOW_UPDATE', FrameType.WINDOW_UPDATE, 1, [0, 3, 5]],
    ['PING', FrameType.PING, 0, [0, 7, 9]],
    ['GOAWAY', FrameType.GOAWAY, 0, [0, 7]],
  ])('rejects %s with a payload of the wrong size', (_name, type, streamId, sizes) => {
    for (const size of sizes) {
      expectProtocolError(
        () => decodeFrames(encodeFrame(type, 0, streamId, Buffer.alloc(size))),
        ProtocolErrorCode.MALFORMED_FRAME,
      );
    }
  });

  it('accepts GOAWAY with exactly 8 bytes (no reason)', () => {
    expect(decodeFrames(encodeFrame(FrameType.GOAWAY, 0, 0, Buffer.alloc(8)))).toHaveLength(1);
  });

  it('stays failed after an error: later input, even valid, throws the same error', () => {
    const frames: Frame[] = [];
    const decoder = new FrameDecoder({ maxFrameSize: 1024, onFrame: (f) => frames.push(f) });
    decoder.push(golden[0]!.bytes);
    let first: unknown;
    try {
      decoder.push(hex('000001 00 00 00000000 00'));
    } catch (error) {
      first = error;
    }
    expect(first).toBeInstanceOf(ProtocolError);
    expect(() => decoder.push(golden[1]!.bytes)).toThrow(first as Error);
    expect(() => decoder.push(Buffer.alloc(0))).toThrow(first as Error);
    expect(frames).toHaveLength(1);
  });
});
