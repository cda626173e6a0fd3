import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../src/agents/token-bucket.js';

describe('TokenBucket', () => {
  it('grants the burst at once, then refuses with the seconds until the next token', () => {
    const bucket = new TokenBucket(2, 3, 0);
    expect([bucket.take(0), bucket.take(0), bucket.take(0)]).toEqual([0, 0, 0]);
    expect(bucket.take(0)).toBe(1);
  });

  it('refills at its rate from the clock, never above the burst', () => {
    const bucket = new TokenBucket(10, 2, 0);
    bucket.take(0);
    bucket.take(0);
    expect(bucket.take(50)).toBe(1); // half a token
    expect(bucket.take(100)).toBe(0); // one token after 100 ms at 10/s
    expect(bucket.take(100_000)).toBe(0);
    expect(bucket.take(100_000)).toBe(0);
    expect(bucket.take(100_000)).toBe(1); // the idle time saved up only `burst` tokens
  });

  it('a slow rate says how long to wait in whole seconds', () => {
    const bucket = new TokenBucket(0.1, 1, 0);
    expect(bucket.take(0)).toBe(0);
    expect(bucket.take(0)).toBe(10);
    expect(bucket.take(5_000)).toBe(5);
  });

  it('a clock that goes backwards refills nothing', () => {
    const bucket = new TokenBucket(1, 1, 1_000);
    expect(bucket.take(1_000)).toBe(0);
    expect(bucket.take(0)).toBe(1);
  });
});
