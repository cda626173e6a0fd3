import { type Frame, FrameDecoder } from '../../src/index.js';

/** Golden fixtures are written as spaced hex so they can be checked against the spec by eye. */
export function hex(text: string): Buffer {
  const clean = text.replace(/\s+/g, '');
  if (!/^(?:[0-9a-f]{2})*$/i.test(clean)) throw new Error(`bad hex fixture: ${text}`);
  return Buffer.from(clean, 'hex');
}

/** Plain-data view of a frame for deep equality (payload copied out of the received chunk). */
export interface FrameData {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

export function frameData(frame: Frame): FrameData {
  return {
    type: frame.type,
    flags: frame.flags,
    streamId: frame.streamId,
    payload: Buffer.from(frame.payload),
  };
}

/** Splits `bytes` at the given offsets (any order, duplicates and out-of-range values allowed). */
export function splitAt(bytes: Buffer, offsets: readonly number[]): Buffer[] {
  const cuts = [...new Set(offsets.map((o) => Math.max(0, Math.min(bytes.length, o))))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const cut of cuts) {
    chunks.push(bytes.subarray(start, cut));
    start = cut;
  }
  chunks.push(bytes.subarray(start));
  return chunks;
}

/** Feeds chunks to a fresh decoder and returns every frame (copied, since payloads are views). */
export function decodeChunks(chunks: readonly Uint8Array[], maxFrameSize = 0xff_ff_ff): FrameData[] {
  const frames: FrameData[] = [];
  const decoder = new FrameDecoder({ maxFrameSize, onFrame: (frame) => frames.push(frameData(frame)) });
  for (const chunk of chunks) decoder.push(chunk);
  if (!decoder.idle) throw new Error('decoder holds a partial frame at the end of the input');
  return frames;
}
