import { describe, expect, it } from 'vitest';
import { NonceWindow } from '../src/cluster/link/nonce-window.js';

describe('NonceWindow', () => {
  it('takes a nonce once and refuses it again until it expires', () => {
    let t = 1_000;
    const window = new NonceWindow(10, () => t);
    expect(window.admit('a', 2_000)).toBe('fresh');
    expect(window.admit('a', 2_000)).toBe('replayed');
    t = 2_000;
    expect(window.admit('a', 3_000)).toBe('replayed');
    expect(window.admit('b', 3_000)).toBe('fresh');
  });

  it('is bounded: when full of live nonces it refuses new ones instead of growing or forgetting early', () => {
    let t = 0;
    const window = new NonceWindow(3, () => t);
    for (const nonce of ['a', 'b', 'c'])
      expect(window.admit(nonce, 1_000 + nonce.charCodeAt(0))).toBe('fresh');
    expect(window.admit('d', 2_000)).toBe('full');
    expect(window.size).toBe(3);
    // Nothing was dropped to make room: every nonce taken is still refused.
    for (const nonce of ['a', 'b', 'c']) expect(window.admit(nonce, 2_000)).toBe('replayed');
    // Once some expire, room comes back, even when they did not expire in the order they came.
    t = 1_098;
    expect(window.admit('d', 3_000)).toBe('fresh');
    expect(window.admit('e', 3_000)).toBe('full');
    t = 1_100;
    expect(window.admit('e', 3_000)).toBe('fresh');
    expect(window.size).toBe(2); // b and c expired meanwhile: d and e remain
  });

  it('drops expired nonces as new ones come, without waiting to be full', () => {
    let t = 0;
    const window = new NonceWindow(100, () => t);
    for (let i = 0; i < 50; i++) window.admit(`n${i}`, 1_000);
    t = 1_001;
    window.admit('late', 5_000);
    expect(window.size).toBe(1);
  });

  it('refuses a cap that is not a positive integer', () => {
    expect(() => new NonceWindow(0)).toThrow(RangeError);
    expect(() => new NonceWindow(1.5)).toThrow(RangeError);
  });
});
