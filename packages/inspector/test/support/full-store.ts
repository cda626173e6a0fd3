import { randomBytes } from 'node:crypto';
import type { Inspector } from '../../src/inspector.js';

/** A text body of `size` bytes: ASCII with two-byte characters spread through it, and no "needle". */
export function textBody(size: number, seed: number): Buffer {
  const line = `{"n":${seed},"text":"lorem ipsum dolor sit amet, café crème brûlée"}\n`;
  return Buffer.from(line.repeat(Math.ceil(size / Buffer.byteLength(line)))).subarray(0, size);
}

/**
 * Fills the store as the report did: `count` exchanges of a 1 MiB response each (one in six binary,
 * exported as base64), each recorded as the agent records it. Returns the bodies in id order.
 */
export function fillStore(inspector: Inspector, count: number, size = 1024 * 1024): Buffer[] {
  const bodies: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const binary = i % 6 === 5;
    const body = binary ? randomBytes(size) : textBody(size, i);
    // A text body cut mid-character would not be UTF-8: trim to the last whole character.
    const whole = binary ? body : Buffer.from(body.toString('utf8').replace(/\uFFFD$/, ''));
    const recorder = inspector.capture.begin({ method: 'GET', target: `/big/${i}`, headers: [] })!;
    recorder.responseHead(200, ['Content-Type', binary ? 'application/octet-stream' : 'application/json']);
    recorder.responseData(whole);
    recorder.finish();
    bodies.push(whole);
  }
  return bodies;
}
