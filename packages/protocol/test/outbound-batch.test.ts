import { describe, expect, it } from 'vitest';
import {
  decodeFrames,
  FRAME_HEADER_SIZE,
  type FrameTransport,
  FrameType,
  OutboundBatch,
} from '../src/index.js';
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

  it('a batch drained again and again, small turns and bursts alike, sends what a fresh batch sends', () => {
    const reused = new OutboundBatch(1024);
    // Turn sizes around the lists' kept length (256 frames), so a burst's let-go lists are covered too.
    for (const [turn, frames] of [3, 1, 300, 2, 257, 256, 0, 5].entries()) {
      const fresh = new OutboundBatch(1024);
      for (const batch of [reused, fresh]) {
        for (let i = 0; i < frames; i++)
          batch.add(FrameType.DATA, i % 2, 2 * i + 1, i % 3 === 0 ? undefined : Buffer.alloc(i % 7, turn));
      }
      expect(reused.empty).toBe(frames === 0);
      expect(reused.bytes).toBe(fresh.bytes);
      const got: Buffer[] = [];
      const want: Buffer[] = [];
      reused.take((m) => got.push(Buffer.from(m)));
      fresh.take((m) => want.push(Buffer.from(m)));
      expect(got, `turn ${turn}`).toEqual(want);
      expect(got.flatMap((m) => decodeFrames(m))).toHaveLength(frames);
      expect(reused.empty).toBe(true);
      expect(reused.bytes).toBe(0);
    }
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

  it("takePieces: joined, the pieces are take()'s message; large payloads are the producers' own chunks", () => {
    const large = Buffer.alloc(8 * 1024, 'L');
    const larger = Buffer.alloc(40 * 1024, 'M');
    const small = Buffer.alloc(8 * 1024 - 1, 's');
    const fill = (batch: OutboundBatch): void => {
      batch.add(FrameType.HEADERS, 0, 1, Buffer.from('head'));
      batch.add(FrameType.DATA, 0, 1, large);
      batch.add(FrameType.DATA, 0, 1, small);
      batch.add(FrameType.DATA, 0, 3, larger);
      batch.add(FrameType.DATA, 1, 3, Buffer.alloc(0));
      batch.add(FrameType.WINDOW_UPDATE, 0, 0, Buffer.alloc(4, 9));
    };
    const copied = new OutboundBatch(256 * 1024);
    fill(copied);
    const messages: Buffer[] = [];
    copied.take((m) => messages.push(m));
    const byPieces = new OutboundBatch(256 * 1024);
    fill(byPieces);
    const taken: { pieces: Buffer[]; size: number; last: boolean }[] = [];
    byPieces.takePieces((pieces, size, last) => taken.push({ pieces, size, last }));
    expect(taken).toHaveLength(1);
    const { pieces, size, last } = taken[0]!;
    expect(last).toBe(true);
    expect(size).toBe(messages[0]!.length);
    expect(Buffer.concat(pieces).equals(messages[0]!)).toBe(true);
    // Headers and the small payloads are copied into runs between the two large payloads, which are the
    // very buffers written (the same memory, not copies).
    expect(pieces).toHaveLength(5);
    expect(pieces[1]).toBe(large);
    expect(pieces[3]).toBe(larger);
    expect(pieces[2]!.length).toBe(FRAME_HEADER_SIZE + small.length + FRAME_HEADER_SIZE);
    expect(byPieces.empty).toBe(true);
    expect(byPieces.bytes).toBe(0);
  });

  it("takePieces splits messages where take() does, and marks only the batch's last one", () => {
    const batch = new OutboundBatch(100);
    batch.add(FrameType.DATA, 0, 1, Buffer.alloc(40));
    batch.add(FrameType.DATA, 0, 1, Buffer.alloc(40));
    batch.add(FrameType.DATA, 0, 3, Buffer.alloc(200));
    batch.add(FrameType.DATA, 0, 5, Buffer.alloc(1));
    const taken: { size: number; last: boolean; joined: Buffer }[] = [];
    batch.takePieces((pieces, size, last) => taken.push({ size, last, joined: Buffer.concat(pieces) }));
    expect(taken.map((t) => t.size)).toEqual([98, 209, 10]);
    expect(taken.map((t) => t.joined.length)).toEqual([98, 209, 10]);
    expect(taken.map((t) => t.last)).toEqual([false, false, true]);
    expect(taken.flatMap((t) => decodeFrames(t.joined).map((f) => f.streamId))).toEqual([1, 1, 3, 5]);
  });

  it('drainTo hands a PieceTransport pieces and a MessageTransport whole messages, counting each', () => {
    const payload = Buffer.alloc(20 * 1024, 'p');
    const run = (transport: FrameTransport): { queued: number[]; sent: [number, boolean][] } => {
      const batch = new OutboundBatch(256 * 1024);
      batch.add(FrameType.DATA, 0, 1, payload);
      const queued: number[] = [];
      const sent: [number, boolean][] = [];
      batch.drainTo(
        transport,
        (bytes) => queued.push(bytes),
        (bytes, last) => sent.push([bytes, last]),
      );
      return { queued, sent };
    };
    const viaPieces: Buffer[][] = [];
    const pieces = run({
      sendPieces: (p, _size, done) => {
        viaPieces.push([...p]);
        done();
      },
      close: () => {},
    });
    const viaMessages: Buffer[] = [];
    const messages = run({
      send: (m, done) => {
        viaMessages.push(Buffer.from(m));
        done();
      },
      close: () => {},
    });
    const size = FRAME_HEADER_SIZE + payload.length;
    for (const counted of [pieces, messages]) {
      expect(counted.queued).toEqual([size]);
      expect(counted.sent).toEqual([[size, true]]);
    }
    expect(viaPieces[0]![1]).toBe(payload);
    expect(Buffer.concat(viaPieces[0]!).equals(viaMessages[0]!)).toBe(true);
  });
});
