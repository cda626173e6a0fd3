import { describe, expect, it } from 'vitest';
import { checkResponseHead, type HeadCheck } from '../src/exchange/response-head-check.js';

function problem(result: HeadCheck): string {
  if (result.ok) throw new Error('expected the head to be rejected');
  return result.problem;
}

const get = { method: 'GET', upgrade: false };

describe('what a rejected head echoes back', () => {
  it('escapes C1 controls and the Unicode line separators, as every other echo of the edge does', () => {
    const reason = problem(
      checkResponseHead({ status: 200, statusMessage: 'OK\u2028\u0085x', headers: [] }, get),
    );
    expect(reason).toBe('reason phrase "OK\\u2028\\u0085x" has a forbidden character');
    const name = problem(
      checkResponseHead({ status: 200, statusMessage: '', headers: ['a\u2029b', 'x'] }, get),
    );
    expect(name).toBe('header name "a\\u2029b" is not a token');
  });

  it('cuts a long value at 64 characters', () => {
    const long = problem(
      checkResponseHead({ status: 200, statusMessage: '', headers: ['x'.repeat(500), '\n'] }, get),
    );
    expect(long).toBe(`header "${'x'.repeat(64)}…" has a forbidden character in its value`);
  });
});
