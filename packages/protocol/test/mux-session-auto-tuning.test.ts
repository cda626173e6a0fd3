import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { FrameType, parseWindowUpdate } from '../src/index.js';
import type { Pair } from './support/mux-harness.js';
import { openRecorded, type StreamRecorder, writeBody } from './support/stream-recorder.js';
import { disposePairs, pairFor, rttSampled } from './support/tuned-pairs.js';

const KiB = 1024;
const settings = { initialStreamWindow: 16 * KiB, initialSessionWindow: 4096 * KiB, maxFrameSize: 16 * KiB };

afterEach(disposePairs);

/** Follows the credit the sender holds, as the receiver sees it after each chunk; read `.max` at the end. */
function trackCredit(agent: StreamRecorder): { max: number } {
  const credit = { max: 0 };
  agent.onChunk = () => {
    credit.max = Math.max(credit.max, agent.stream.recvWindow);
  };
  return credit;
}

/** Sum of the stream WINDOW_UPDATE increments the receiving side (the agent) sent for `streamId`. */
function creditReturned(pair: Pair, streamId: number): number {
  return pair.agent.transport.sent.frames
    .filter((f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === streamId)
    .reduce((sum, f) => sum + parseWindowUpdate(f.payload), 0);
}

describe('receive-window auto-tuning', () => {
  it('is off with a zero session budget: no timing PING, credit returned equals bytes consumed', async () => {
    const pair = await pairFor({
      settings,
      maxStreamWindow: 1024 * KiB,
      sessionWindowBudget: 0,
      latencyMs: 5,
    });
    expect(pair.agent.session.maxStreamWindow).toBe(settings.initialStreamWindow);
    const { edge, agent } = await openRecorded(pair, 'sync');
    const body = randomBytes(512 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(pair.agent.transport.sent.frames.some((f) => f.type === FrameType.PING)).toBe(false);
    expect(pair.agent.session.rttMs).toBe(0);
    expect(creditReturned(pair, edge.stream.id)).toBeLessThanOrEqual(body.length);
    expect(agent.maxUnconsumed).toBeLessThanOrEqual(settings.initialStreamWindow);
  });

  it('measures the round trip from PINGs sent right after HELLO', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 1024 * KiB, latencyMs: 10 });
    await rttSampled(pair);
    // Two one-way delays of 10 ms, plus the turns in between.
    expect(pair.agent.session.rttMs).toBeGreaterThanOrEqual(19);
    expect(pair.agent.session.rttMs).toBeLessThan(1000);
  });

  it('a consumer that keeps up over a slow link grows the window up to the maximum, and no further', async () => {
    const max = 256 * KiB;
    const pair = await pairFor({ settings, maxStreamWindow: max, latencyMs: 10 });
    await rttSampled(pair);
    const { edge, agent } = await openRecorded(pair, 'sync');
    const credit = trackCredit(agent);
    const body = randomBytes(4096 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    // Extra credit was granted: more was returned than consumed, and the sender held more than the initial
    // window at once; never more than the maximum.
    expect(creditReturned(pair, edge.stream.id)).toBeGreaterThan(body.length - settings.initialStreamWindow);
    expect(credit.max).toBeGreaterThan(settings.initialStreamWindow);
    expect(credit.max).toBeLessThanOrEqual(max);
    const increments = pair.agent.transport.sent.frames
      .filter((f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === edge.stream.id)
      .map((f) => parseWindowUpdate(f.payload));
    expect(Math.max(...increments)).toBeLessThanOrEqual(max);
  });

  it('on loopback a consumer that keeps up grows the window: it covers the event loops, not only the path', async () => {
    const max = 1024 * KiB;
    const pair = await pairFor({ settings, maxStreamWindow: max });
    await rttSampled(pair);
    const { edge, agent } = await openRecorded(pair, 'sync');
    const credit = trackCredit(agent);
    const body = randomBytes(2048 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(credit.max).toBeGreaterThan(settings.initialStreamWindow);
    expect(credit.max).toBeLessThanOrEqual(max);
  });

  // Loopback (0) as well as a 5 ms path: 4 KiB every 25 ms takes ~75 ms for a 16 KiB window, far beyond two
  // turnarounds of 2 ms or two round trips of 10.
  it.each([0, 5])(
    'a consumer that does not keep up keeps the initial window (and the memory it bounds), %i ms one way',
    async (latencyMs) => {
      const pair = await pairFor({ settings, maxStreamWindow: 1024 * KiB, latencyMs });
      await rttSampled(pair);
      const { edge, agent } = await openRecorded(pair, 'manual');
      // Consumes 4 KiB every 25 ms: far slower than the link, so credit comes back slowly.
      const timer = setInterval(() => {
        const n = Math.min(agent.unconsumed, 4 * KiB);
        if (n > 0) {
          agent.consumed += n;
          agent.stream.consume(n);
        }
      }, 25);
      try {
        const body = randomBytes(96 * KiB);
        await writeBody(edge, body, 16 * KiB);
        await agent.ended.promise;
        expect(agent.body().equals(body)).toBe(true);
      } finally {
        clearInterval(timer);
      }
      expect(agent.maxUnconsumed).toBeLessThanOrEqual(settings.initialStreamWindow);
      expect(creditReturned(pair, edge.stream.id)).toBeLessThanOrEqual(96 * KiB);
    },
  );
});
