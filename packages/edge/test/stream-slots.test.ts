import type { MuxSession, MuxStream } from '@tunnel2/protocol';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type SlotWaiter, StreamSlots } from '../src/agents/stream-slots.js';

/** The part of a session StreamSlots uses: its open streams, the peer's limit and openStream(). */
function fakeSession(peerLimit: number) {
  const streams = new Map<number, MuxStream>();
  let next = 1;
  const session = {
    streams,
    peerSettings: { maxConcurrentStreams: peerLimit },
    openStream(): MuxStream {
      const stream = { id: next } as MuxStream;
      streams.set(next, stream);
      next += 2;
      return stream;
    },
  };
  return { session: session as unknown as MuxSession, streams };
}

function recorder(log: string[], name: string): SlotWaiter {
  return {
    granted: (stream) => log.push(`${name} granted ${stream.id}`),
    refused: () => log.push(`${name} refused`),
  };
}

describe('StreamSlots', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens at once under the limit, then queues; freed slots go to the oldest waiter first', () => {
    const { session, streams } = fakeSession(1000);
    const slots = new StreamSlots(session, { maxStreams: 1, maxWaitMs: 1000, maxWaiting: 10 });
    const first = slots.tryOpen();
    expect(first?.id).toBe(1);
    expect(slots.tryOpen()).toBeUndefined();
    const log: string[] = [];
    expect(slots.wait(recorder(log, 'a'))).toBe(true);
    expect(slots.wait(recorder(log, 'b'))).toBe(true);
    streams.delete(1);
    slots.release();
    expect(log).toEqual(['a granted 3']);
    // Nobody overtakes the queue while it is not empty.
    streams.delete(3);
    expect(slots.tryOpen()).toBeUndefined();
    slots.release();
    expect(log).toEqual(['a granted 3', 'b granted 5']);
  });

  it("honours the agent's own limit when it is lower", () => {
    const { session } = fakeSession(2);
    const slots = new StreamSlots(session, { maxStreams: 100, maxWaitMs: 0, maxWaiting: 10 });
    expect(slots.tryOpen()).toBeDefined();
    expect(slots.tryOpen()).toBeDefined();
    expect(slots.tryOpen()).toBeUndefined();
    expect(slots.wait(recorder([], 'x'))).toBe(false); // no wait configured
  });

  it('one timer expires waiters in arrival order, each after its own wait', () => {
    const { session } = fakeSession(1000);
    const slots = new StreamSlots(session, { maxStreams: 1, maxWaitMs: 1000, maxWaiting: 10 });
    slots.tryOpen();
    const log: string[] = [];
    slots.wait(recorder(log, 'a'));
    vi.advanceTimersByTime(400);
    slots.wait(recorder(log, 'b'));
    vi.advanceTimersByTime(599);
    expect(log).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(log).toEqual(['a refused']);
    vi.advanceTimersByTime(399);
    expect(log).toEqual(['a refused']);
    vi.advanceTimersByTime(1);
    expect(log).toEqual(['a refused', 'b refused']);
    expect(slots.waiting).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a cancelled waiter is never called; the queue is bounded; close refuses everyone left', () => {
    const { session, streams } = fakeSession(1000);
    const slots = new StreamSlots(session, { maxStreams: 1, maxWaitMs: 1000, maxWaiting: 2 });
    slots.tryOpen();
    const log: string[] = [];
    const a = recorder(log, 'a');
    slots.wait(a);
    slots.wait(recorder(log, 'b'));
    expect(slots.wait(recorder(log, 'c'))).toBe(false);
    slots.cancel(a);
    expect(slots.waiting).toBe(1);
    vi.advanceTimersByTime(500);
    slots.wait(recorder(log, 'd'));
    streams.clear();
    slots.release();
    expect(log).toEqual(['b granted 3']);
    slots.close();
    expect(log).toEqual(['b granted 3', 'd refused']);
    expect(slots.wait(recorder(log, 'e'))).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });
});
