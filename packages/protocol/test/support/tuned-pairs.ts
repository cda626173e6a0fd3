import { expect } from 'vitest';
import { connectPair, type Pair, type PairOptions } from './mux-harness.js';

const pairs: Pair[] = [];

/** connectPair, remembered so that `disposePairs()` (the test file's afterEach) ends it. */
export async function pairFor(options: PairOptions): Promise<Pair> {
  const pair = await connectPair(options);
  pairs.push(pair);
  return pair;
}

export function disposePairs(): void {
  for (const pair of pairs.splice(0)) pair.dispose();
}

/** Waits (bounded) until both sides measured the round trip auto-tuning needs (PINGs sent after HELLO). */
export async function rttSampled(pair: Pair): Promise<void> {
  for (let i = 0; i < 200 && (pair.agent.session.rttMs === 0 || pair.edge.session.rttMs === 0); i++)
    await new Promise((r) => setTimeout(r, 5));
  expect(pair.agent.session.rttMs).toBeGreaterThan(0);
}
