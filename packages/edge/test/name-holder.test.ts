import type { SessionRecord } from '@tunnel2/registry';
import { describe, expect, it } from 'vitest';
import { heldByOther } from '../src/agents/name-holder.js';

const GRACE = 60_000;
const reserved = (disconnectedAt: number): SessionRecord => ({
  name: 'x',
  nodeId: 'n',
  owner: 'o',
  epoch: 1,
  expiresAt: disconnectedAt + GRACE,
  connected: false,
});

describe('heldByOther', () => {
  it('a live holder is another agent', () => {
    const refusal = heldByOther('x', { ...reserved(0), connected: true }, GRACE, 0);
    expect(refusal).toMatchObject({ holder: 'other', message: 'subdomain "x" is taken by another agent' });
  });

  it('a reservation says since when and for how long, the two adding up to the grace', () => {
    for (const ago of [0, 400, 600, 1_000, 1_500, 59_400]) {
      const refusal = heldByOther('x', reserved(0), GRACE, ago);
      const [, since, left] = /disconnected (\d+) s ago, free in (\d+) s$/.exec(refusal.message) ?? [];
      expect(Number(since) + Number(left), `${ago} ms after`).toBe(GRACE / 1000);
      expect(refusal.retryAfterS).toBe(Number(left));
      expect(refusal.holder).toBe('reserved');
    }
  });
});
