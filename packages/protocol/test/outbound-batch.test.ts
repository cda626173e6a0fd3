import { describe, expect, it } from 'vitest';
import { decodeFrames, FRAME_HEADER_SIZE, FrameType, OutboundBatch } from '../src/index.js';
import { frameData } from './support/bytes.js';

describe('OutboundBatch', () => {
  it('packs queued frames into one message in order', () => {
    const batch = new OutboundBatch(1024);
    batch.add(FrameType.HEADERS, 0, 1, Buffer.from('head'));
    batch.add(FrameType.DATA, 1, 1, Buffer.alloc(0));
    batch.add(FrameType.PING, 0, 0, Buffer.alloc(8, 1));
    expect(batch.bytes).toBe(3 * FRAME_HEADER_SIZE + 4 + 8);
    const messages: Buffer[] = [];
    batch.take((m) => messages.push(m));
    expect(messages).toHaveLength(1);
    expect(decodeFrames(messages[0]!).map(frameData)).toEqual([
      { type: FrameType.HEADERS, flags: 0, streamId: 1, payload: Buffer.from('head') },
      { type: FrameType.DATA, flags: 1, streamId: 1, payload: Buffer.alloc(0) },
      { type: FrameType.PING, flags: 0, streamId: 0, payload: Buffer.alloc(8, 1) },
    ]);
    expect(batch.empty).toBe(true);
    expect(batch.bytes).toBe(0);
  });

  it('splits at maxMessageSize on frame boundaries; a bigger frame gets a message of its own', () => {
    const batch = new OutboundBatch(100);
    batch.add(FrameType.DATA, 0, 1, Buffer.alloc(40));
    batch.add(FrameType.DATA, 0, 1, Buffer.alloc(40)); // 2 × 49 = 98 fits
    batch.add(FrameType.DATA, 0, 3, Buffer.alloc(200)); // alone, over the limit
    batch.add(FrameType.DATA, 0, 5, Buffer.alloc(1));
    const messages: Buffer[] = [];
    batch.take((m) => messages.push(m));
    expect(messages.map((m) => m.length)).toEqual([98, 209, 10]);
    expect(messages.flatMap((m) => decodeFrames(m).map((f) => f.streamId))).toEqual([1, 1, 3, 5]);
  });

  it('copies payloads at take(), so the caller may reuse them afterwards', () => {
    const batch = new OutboundBatch(1024);
    const payload = Buffer.from('abc');
    batch.add(FrameType.DATA, 0, 1, payload);
    const messages: Buffer[] = [];
    batch.take((m) => messages.push(m));
    payload.fill(0);
    expect(decodeFrames(messages[0]!)[0]!.payload.toString()).toBe('abc');
  });
  it('reuses a message buffer only after the transport released it', () => {
    const batch = new OutboundBatch(1024);
    // A message of at least a quarter of maxMessageSize: smaller ones are never pooled.
    const payload = Buffer.alloc(300, 'x');
    const take = (): { message: Buffer; release: () => void } => {
      batch.add(FrameType.DATA, 0, 1, payload);
      let taken: { message: Buffer; release: () => void } | undefined;
      batch.take((message, release) => {
        taken = { message, release };
      });
      return taken!;
    };
    const first = take();
    const second = take();
    // Still held by the transport: a second message must not share its memory.
    expect(second.message.buffer).not.toBe(first.message.buffer);
    first.release();
    const third = take();
    expect(third.message.buffer).toBe(first.message.buffer);
    expect(decodeFrames(third.message)[0]!.payload).toEqual(payload);
  });
});
