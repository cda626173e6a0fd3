import { describe, expect, it } from 'vitest';
import { WsFrameCounter } from '../src/capture/ws-frame-counter.js';

/** One frame as RFC 6455 §5.2 lays it out (the mask is applied: its bytes are payload to the counter). */
function frame(opcode: number, payload: Buffer, options: { fin?: boolean; mask?: boolean } = {}): Buffer {
  const fin = options.fin ?? true;
  const mask = options.mask ?? false;
  const n = payload.length;
  const head: number[] = [(fin ? 0x80 : 0) | opcode];
  const m = mask ? 0x80 : 0;
  if (n < 126) head.push(m | n);
  else if (n < 0x1_00_00) head.push(m | 126, n >> 8, n & 0xff);
  else head.push(m | 127, 0, 0, 0, 0, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
  const key = mask ? [0x12, 0x34, 0x56, 0x78] : [];
  const body = mask ? payload.map((b, i) => b ^ key[i % 4]!) : payload;
  return Buffer.concat([Buffer.from(head), Buffer.from(key), body]);
}

// Five messages: text, a fragmented one in three frames with a ping between, 16-bit and 64-bit lengths,
// an empty one; and a pong and a close, which are not messages.
function stream(mask: boolean): Buffer {
  const f = (opcode: number, payload: Buffer, fin = true) => frame(opcode, payload, { fin, mask });
  return Buffer.concat([
    f(1, Buffer.from('hello')),
    f(1, Buffer.from('frag-'), false),
    f(9, Buffer.from('ping')),
    f(0, Buffer.from('ment-'), false),
    f(0, Buffer.from('ed')),
    f(2, Buffer.alloc(300, 7)),
    f(2, Buffer.alloc(70_000, 9)),
    f(1, Buffer.alloc(0)),
    f(10, Buffer.from('pong')),
    f(8, Buffer.from([0x03, 0xe8])),
  ]);
}

function count(chunks: Buffer[]): number {
  const counter = new WsFrameCounter();
  for (const chunk of chunks) counter.add(chunk);
  expect(counter.broken).toBe(false);
  return counter.messages;
}

describe('WebSocket message counting from frame headers', () => {
  for (const mask of [false, true]) {
    const bytes = stream(mask);
    it(`counts data messages once, not control frames (${mask ? 'masked, client' : 'unmasked, server'})`, () => {
      expect(count([bytes])).toBe(5);
    });

    it(`gives the same count split at every offset (${mask ? 'masked' : 'unmasked'})`, () => {
      // Every split inside the headers and small frames, then a stride through the large payload.
      for (let at = 0; at <= bytes.length; at += at < 400 || at > bytes.length - 400 ? 1 : 997) {
        expect(count([bytes.subarray(0, at), bytes.subarray(at)])).toBe(5);
      }
    });
  }

  it('byte by byte', () => {
    const bytes = stream(true);
    const counter = new WsFrameCounter();
    for (let i = 0; i < bytes.length; i++) counter.add(bytes.subarray(i, i + 1));
    expect(counter.messages).toBe(5);
  });

  it('stops counting at a 64-bit length no number can hold, instead of skipping garbage', () => {
    const counter = new WsFrameCounter();
    counter.add(Buffer.from([0x82, 127, 0xff, 0, 0, 0, 0, 0, 0, 1]));
    counter.add(frame(1, Buffer.from('after')));
    expect(counter.broken).toBe(true);
    expect(counter.messages).toBe(1);
  });
});
