import { describe, expect, it } from 'vitest';
import { ReceiveWindow, type TuningHost } from '../src/session/receive-window.js';
import { WindowBudget } from '../src/session/window-budget.js';

const KiB = 1024;

describe('WindowBudget', () => {
  it('hands out at most its limit, and what is given back can be taken again', () => {
    const budget = new WindowBudget(100);
    expect(budget.take(60)).toBe(60);
    expect(budget.take(60)).toBe(40);
    expect(budget.take(1)).toBe(0);
    budget.give(30);
    expect(budget.available).toBe(30);
    expect(budget.take(50)).toBe(30);
    budget.give(1000);
    expect(budget.used).toBe(0);
  });

  it('a shared budget bounds every session budget drawing on it', () => {
    const edge = new WindowBudget(100);
    const a = new WindowBudget(80, edge);
    const b = new WindowBudget(80, edge);
    expect(a.take(80)).toBe(80);
    expect(b.available).toBe(20);
    expect(b.take(80)).toBe(20);
    expect(edge.used).toBe(100);
    a.give(50);
    expect(edge.used).toBe(50);
    expect(b.take(80)).toBe(50);
    expect(a.used + b.used).toBe(edge.used);
  });

  it('a budget drawing on several is bounded by each, and charges each and theirs once', () => {
    const edge = new WindowBudget(1000);
    const session = new WindowBudget(300, edge);
    const tenant = new WindowBudget(100);
    const client = new WindowBudget(150);
    const stream = new WindowBudget(Number.MAX_SAFE_INTEGER, [tenant, client, session]);
    expect(stream.take(500)).toBe(100);
    expect([tenant.used, client.used, session.used, edge.used]).toEqual([100, 100, 100, 100]);
    // Another stream of the same client, another tenant: the client's share is what is left.
    const other = new WindowBudget(Number.MAX_SAFE_INTEGER, [new WindowBudget(100), client, session]);
    expect(other.take(500)).toBe(50);
    expect(edge.used).toBe(150);
    stream.give(1000);
    other.give(1000);
    expect([tenant.used, client.used, session.used, edge.used]).toEqual([0, 0, 0, 0]);
  });
});

/** One stream's receive side, driven by hand: a clock in ms, and the credit returned as the session would. */
class Receiver {
  readonly window: ReceiveWindow;
  readonly host: TuningHost;
  now = 1;
  /** What the peer may still send, what arrived and was not yet credited back. */
  credit: number;
  unacked = 0;

  constructor(initial: number, budget: WindowBudget, maxStreamWindow: number, rttMs = 10) {
    this.window = new ReceiveWindow(initial);
    this.host = { rttMs, maxStreamWindow, windowBudget: budget };
    this.credit = initial;
  }

  /** The peer sends all its credit and we consume it in `ms`; credit goes back as MuxStream.consume does. */
  roundOfWindow(ms: number): void {
    const n = this.credit;
    this.credit = 0;
    const step = Math.max(1, n >>> 3);
    for (let done = 0; done < n; done += step) {
      const bytes = Math.min(step, n - done);
      this.now += (ms * bytes) / n;
      this.unacked += bytes;
      this.window.consumed(bytes, this.host, this.now);
      if (this.unacked >= this.window.size >>> 2) {
        this.credit += this.window.credit(this.unacked, this.host.windowBudget);
        this.unacked = 0;
      }
    }
  }

  /** What the peer may have in flight plus what we hold: the memory this stream can cost. */
  get exposure(): number {
    return this.credit + this.unacked;
  }
}

describe('ReceiveWindow', () => {
  it('grows while the round trip limits the stream, taking from the budget, up to the maximum', () => {
    const budget = new WindowBudget(4096 * KiB);
    const r = new Receiver(64 * KiB, budget, 1024 * KiB);
    for (let i = 0; i < 12; i++) r.roundOfWindow(1);
    expect(r.window.size).toBe(1024 * KiB);
    expect(budget.used).toBe(1024 * KiB - 64 * KiB);
    expect(r.exposure).toBeLessThanOrEqual(64 * KiB + budget.used);
  });

  it('never grows past what the budget has left, and the exposure stays within initial + budget', () => {
    const budget = new WindowBudget(100 * KiB);
    const r = new Receiver(64 * KiB, budget, 1024 * KiB);
    for (let i = 0; i < 12; i++) {
      r.roundOfWindow(1);
      expect(r.exposure).toBeLessThanOrEqual(64 * KiB + 100 * KiB);
    }
    expect(r.window.size).toBe(64 * KiB + 100 * KiB);
    expect(budget.used).toBe(100 * KiB);
  });

  it('halves when a window takes more than eight round trips, and gives the budget back as credit returns', () => {
    const budget = new WindowBudget(4096 * KiB);
    const r = new Receiver(64 * KiB, budget, 1024 * KiB);
    for (let i = 0; i < 12; i++) r.roundOfWindow(1);
    const grown = budget.used;
    // The consumer becomes the limit: 200 ms per window over a 10 ms round trip.
    for (let i = 0; i < 12; i++) {
      r.roundOfWindow(200);
      expect(r.exposure).toBeLessThanOrEqual(64 * KiB + budget.used);
    }
    expect(r.window.size).toBe(64 * KiB);
    expect(budget.used).toBeLessThan(grown);
    // All debt collected: the budget holds nothing for this stream any more.
    r.roundOfWindow(200);
    expect(budget.used).toBe(0);
    expect(r.exposure).toBeLessThanOrEqual(64 * KiB);
  });

  it('gives everything back when the stream closes', () => {
    const budget = new WindowBudget(4096 * KiB);
    const r = new Receiver(64 * KiB, budget, 1024 * KiB);
    for (let i = 0; i < 6; i++) r.roundOfWindow(1);
    expect(budget.used).toBeGreaterThan(0);
    r.window.release(budget);
    expect(budget.used).toBe(0);
  });

  it('keeps the initial window when the budget is exhausted', () => {
    const exhausted = new WindowBudget(1024 * KiB);
    exhausted.take(1024 * KiB);
    const late = new Receiver(64 * KiB, exhausted, 1024 * KiB);
    for (let i = 0; i < 6; i++) late.roundOfWindow(1);
    expect(late.window.size).toBe(64 * KiB);
    expect(late.exposure).toBe(64 * KiB);
  });
});
