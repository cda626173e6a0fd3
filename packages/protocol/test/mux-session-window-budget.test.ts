import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defaultSettings,
  defaultWindowTuning,
  FrameType,
  parseWindowUpdate,
  type SessionRole,
  WindowBudget,
} from '../src/index.js';
import { requestHead } from './support/exchange.js';
import type { Pair } from './support/mux-harness.js';
import { openRecorded, type StreamRecorder, writeBody } from './support/stream-recorder.js';
import { disposePairs, pairFor, rttSampled } from './support/tuned-pairs.js';

const KiB = 1024;
const settings = { initialStreamWindow: 16 * KiB, initialSessionWindow: 4096 * KiB, maxFrameSize: 16 * KiB };

afterEach(disposePairs);

/** Opens `count` streams from the edge, one at a time (openRecorded owns the agent's onStream meanwhile). */
async function openMany(pair: Pair, count: number) {
  const streams: { edge: StreamRecorder; agent: StreamRecorder }[] = [];
  for (let i = 0; i < count; i++) streams.push(await openRecorded(pair, 'sync'));
  return streams;
}

/** Credit the receiving side has out with its peer plus what it holds unconsumed, over its streams. */
function exposure(receivers: StreamRecorder[]): number {
  let total = 0;
  for (const r of receivers) if (!r.stream.closed) total += r.stream.recvWindow + r.unconsumed;
  return total;
}

describe('auto-tuning defaults', () => {
  it('is on by default: a timing PING and the session window grown by the budget right after HELLO', async () => {
    const pair = await pairFor({ defaultTuning: true });
    for (const side of [pair.edge, pair.agent]) {
      expect(side.session.maxStreamWindow).toBe(defaultWindowTuning.maxStreamWindow);
      expect(side.session.windowBudget.limit).toBe(defaultWindowTuning.sessionWindowBudget);
    }
    await rttSampled(pair);
    for (const side of [pair.edge, pair.agent]) {
      const grant = await side.transport.sent.waitFor((f) => f.type === FrameType.WINDOW_UPDATE);
      expect(grant.streamId).toBe(0);
      expect(parseWindowUpdate(grant.payload)).toBe(defaultWindowTuning.sessionWindowBudget);
      expect(side.transport.sent.frames.some((f) => f.type === FrameType.PING)).toBe(true);
    }
    expect(pair.edge.session.sessionSendWindow).toBe(
      defaultSettings.initialSessionWindow + defaultWindowTuning.sessionWindowBudget,
    );
  });
});

describe('window budgets', () => {
  it('many streams growing at once never hold more than the session budget, and give it all back', async () => {
    const budget = 96 * KiB;
    const pair = await pairFor({
      settings,
      maxStreamWindow: 256 * KiB,
      sessionWindowBudget: budget,
      latencyMs: 5,
    });
    await rttSampled(pair);
    const streams = await openMany(pair, 6);
    const receivers = streams.map((s) => s.agent);
    let peakUsed = 0;
    let peakExposure = 0;
    for (const r of receivers) {
      r.onChunk = () => {
        peakUsed = Math.max(peakUsed, pair.agent.session.windowBudget.used);
        peakExposure = Math.max(peakExposure, exposure(receivers));
      };
    }
    const bodies = streams.map(() => randomBytes(1024 * KiB));
    await Promise.all(streams.map((s, i) => writeBody(s.edge, bodies[i]!, 16 * KiB)));
    await Promise.all(receivers.map((r) => r.ended.promise));
    for (const [i, r] of receivers.entries()) expect(r.body().equals(bodies[i]!)).toBe(true);
    expect(peakUsed).toBeGreaterThan(0);
    expect(peakUsed).toBeLessThanOrEqual(budget);
    expect(peakExposure).toBeLessThanOrEqual(6 * settings.initialStreamWindow + budget);
    expect(pair.agent.session.windowBudget.used).toBe(0);
  });

  it('a window whose consumer became the limit shrinks and returns its budget', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, latencyMs: 5 });
    await rttSampled(pair);
    const { edge, agent } = await openRecorded(pair, 'manual');
    const budget = pair.agent.session.windowBudget;
    const fastBytes = 1536 * KiB;
    let peak = 0;
    let afterSlow = Number.POSITIVE_INFINITY;
    let slow: NodeJS.Timeout | undefined;
    // Fast: every chunk is consumed as it arrives. Then slow: 16 KiB every 10 ms, far below the link; the
    // budget is read once 512 KiB went through the slow consumer (two windows' worth at the peak size),
    // while the peer still has bytes to send.
    agent.onChunk = () => {
      if (agent.consumed < fastBytes) {
        agent.consumeAll();
        peak = Math.max(peak, budget.used);
        return;
      }
      slow ??= setInterval(() => {
        const n = Math.min(agent.unconsumed, 16 * KiB);
        if (n > 0) {
          agent.consumed += n;
          agent.stream.consume(n);
        }
        if (agent.consumed >= fastBytes + 512 * KiB) afterSlow = Math.min(afterSlow, budget.used);
      }, 10);
    };
    const body = randomBytes(fastBytes + 1024 * KiB);
    try {
      await writeBody(edge, body, 16 * KiB);
      await agent.ended.promise;
    } finally {
      clearInterval(slow);
    }
    expect(agent.body().equals(body)).toBe(true);
    expect(peak).toBeGreaterThan(0);
    expect(afterSlow).toBeLessThan(peak);
    // The peer ended and the last bytes are consumed: nothing more can arrive, the rest goes back.
    agent.consumeAll();
    expect(budget.used).toBe(0);
  });

  it('a new stream still gets its initial window when the budget is exhausted', async () => {
    const pair = await pairFor({
      settings,
      maxStreamWindow: 256 * KiB,
      sessionWindowBudget: 64 * KiB,
      latencyMs: 5,
    });
    await rttSampled(pair);
    const budget = pair.agent.session.windowBudget;
    expect(budget.take(budget.limit)).toBe(64 * KiB);
    const { edge, agent } = await openRecorded(pair, 'sync');
    expect(edge.stream.sendWindow).toBe(settings.initialStreamWindow);
    let maxCredit = 0;
    agent.onChunk = () => {
      maxCredit = Math.max(maxCredit, agent.stream.recvWindow);
    };
    const body = randomBytes(512 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(maxCredit).toBeLessThanOrEqual(settings.initialStreamWindow);
    expect(budget.used).toBe(64 * KiB);
  });

  it('an edge-wide budget bounds the growth of two sessions together', async () => {
    const shared = new WindowBudget(64 * KiB);
    const options = { settings, maxStreamWindow: 256 * KiB, sessionWindowBudget: 256 * KiB, latencyMs: 5 };
    const a = await pairFor({ ...options, sharedWindowBudget: shared });
    const b = await pairFor({ ...options, sharedWindowBudget: shared });
    await Promise.all([rttSampled(a), rttSampled(b)]);
    const [sa, sb] = [await openRecorded(a, 'sync'), await openRecorded(b, 'sync')];
    let peak = 0;
    const sample = (): void => {
      const sum = a.agent.session.windowBudget.used + b.agent.session.windowBudget.used;
      expect(sum).toBe(shared.used);
      peak = Math.max(peak, shared.used);
    };
    sa.agent.onChunk = sample;
    sb.agent.onChunk = sample;
    const body = randomBytes(1024 * KiB);
    await Promise.all([writeBody(sa.edge, body, 16 * KiB), writeBody(sb.edge, body, 16 * KiB)]);
    await Promise.all([sa.agent.ended.promise, sb.agent.ended.promise]);
    expect(sa.agent.body().equals(body) && sb.agent.body().equals(body)).toBe(true);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(64 * KiB);
    expect(shared.used).toBe(0);
  });
});

describe("a stream's own budget", () => {
  it('bounds its growth below the session budget, and everything goes back to both on the end', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, latencyMs: 5 });
    await rttSampled(pair);
    const { edge, agent } = await openRecorded(pair, 'sync');
    const session = pair.agent.session.windowBudget;
    const own = new WindowBudget(32 * KiB, session);
    agent.stream.useWindowBudget(own);
    let peak = 0;
    let maxCredit = 0;
    agent.onChunk = () => {
      peak = Math.max(peak, session.used);
      maxCredit = Math.max(maxCredit, agent.stream.recvWindow);
    };
    const body = randomBytes(1024 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(32 * KiB);
    expect(maxCredit).toBeLessThanOrEqual(settings.initialStreamWindow + 32 * KiB);
    expect(own.used).toBe(0);
    expect(session.used).toBe(0);
  });

  it('is refused once DATA arrived (growth taken from the session would be left behind)', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, latencyMs: 5 });
    const { edge, agent } = await openRecorded(pair, 'manual');
    let seen = false;
    agent.onChunk = () => {
      seen = true;
    };
    edge.stream.write(Buffer.alloc(100));
    while (!seen) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(() => agent.stream.useWindowBudget(new WindowBudget(1))).toThrow(/after DATA/);
  });
});

describe('growing a window at once', () => {
  it('grants the credit right away within the budget, and the budget comes back once the stream ends', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, sessionWindowBudget: 100 * KiB });
    const { edge, agent } = await openRecorded(pair, 'manual');
    const budget = pair.agent.session.windowBudget;
    // More than the budget has: what is left of it.
    expect(agent.stream.growWindow(200 * KiB)).toBe(100 * KiB);
    expect(agent.stream.growWindow(16 * KiB)).toBe(0);
    expect(agent.stream.recvWindow).toBe(settings.initialStreamWindow + 100 * KiB);
    const update = await pair.agent.transport.sent.waitFor(
      (f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === agent.stream.id,
    );
    expect(parseWindowUpdate(update.payload)).toBe(100 * KiB);
    // The sender may send the whole grown window while the receiver has consumed nothing.
    const body = randomBytes(settings.initialStreamWindow + 100 * KiB);
    await writeBody(edge, body, 16 * KiB);
    await agent.waitForBytes(body.length);
    agent.consumeAll();
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(budget.used).toBe(0);
  });
});

describe('growing a window before the head', () => {
  it('sends the grant right after the head of a stream the peer does not know yet', async () => {
    const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, sessionWindowBudget: 100 * KiB });
    const stream = pair.edge.session.openStream();
    expect(stream.growWindow(64 * KiB)).toBe(64 * KiB);
    expect(pair.edge.transport.sent.frames.some((f) => f.streamId === stream.id)).toBe(false);
    stream.sendHeaders(requestHead('/grant'), true);
    const update = await pair.edge.transport.sent.waitFor(
      (f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === stream.id,
    );
    const frames = pair.edge.transport.sent.frames.filter((f) => f.streamId === stream.id);
    expect(frames.map((f) => f.type)).toEqual([FrameType.HEADERS, FrameType.WINDOW_UPDATE]);
    expect(parseWindowUpdate(update.payload)).toBe(64 * KiB);
  });
});

describe('a peer from before auto-tuning', () => {
  for (const oldSide of ['edge', 'agent'] as SessionRole[]) {
    it(`interoperates both ways when the ${oldSide} keeps exact windows`, async () => {
      const pair = await pairFor({ settings, maxStreamWindow: 256 * KiB, latencyMs: 5, oldSide });
      const newSide = oldSide === 'edge' ? pair.agent : pair.edge;
      const old = oldSide === 'edge' ? pair.edge : pair.agent;
      for (let i = 0; i < 200 && newSide.session.rttMs === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(old.session.windowBudget.limit).toBe(0);
      // The old side sends no timing PING and no extra session credit; it only answers the new side's PINGs.
      expect(old.transport.sent.frames.some((f) => f.type === FrameType.PING && f.flags === 0)).toBe(false);
      expect(old.transport.sent.frames.some((f) => f.type === FrameType.WINDOW_UPDATE)).toBe(false);
      const { edge, agent } = await openRecorded(pair, 'sync');
      const down = randomBytes(1024 * KiB);
      const up = randomBytes(1024 * KiB);
      agent.stream.sendHeaders(requestHead('/response'), false);
      await Promise.all([writeBody(edge, down, 16 * KiB), writeBody(agent, up, 16 * KiB)]);
      await Promise.all([agent.ended.promise, edge.ended.promise]);
      expect(agent.body().equals(down)).toBe(true);
      expect(edge.body().equals(up)).toBe(true);
      // The old receiver returned exactly what was consumed; the new one granted more.
      const oldReceived = oldSide === 'edge' ? edge : agent;
      expect(oldReceived.maxUnconsumed).toBeLessThanOrEqual(settings.initialStreamWindow);
      expect(newSide.session.windowBudget.used).toBe(0);
    });
  }
});
