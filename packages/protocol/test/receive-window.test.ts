import { afterEach, describe, expect, it, vi } from 'vitest';
import { ReceiveWindow } from '../src/session/receive-window.js';
import { WindowBudget } from '../src/session/window-budget.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('ReceiveWindow clock reads', () => {
  it('reads the clock when an epoch starts and when it completes, not on every consume', () => {
    const clock = vi.spyOn(performance, 'now');
    const window = new ReceiveWindow(64 * 1024);
    const host = { rttMs: 10, maxStreamWindow: 1024 * 1024, windowBudget: new WindowBudget(1024 * 1024) };
    // 1000 small reads inside one window's worth: the epoch's start only.
    for (let i = 0; i < 1000; i++) window.consumed(16, host);
    expect(clock).toHaveBeenCalledTimes(1);
    // The rest of the window completes the epoch: one more read, which also starts the next epoch.
    window.consumed(64 * 1024 - 16_000, host);
    expect(clock).toHaveBeenCalledTimes(2);
  });
});

describe('ReceiveWindow on a path faster than the event loops (loopback)', () => {
  const KiB = 1024;
  const initial = 64 * KiB;
  function loopbackHost(rttMs: number) {
    return { rttMs, maxStreamWindow: 1024 * KiB, windowBudget: new WindowBudget(4096 * KiB) };
  }
  /** A reader taking `rounds` whole windows 1 ms apart, returning credit as it goes; answers the last time. */
  function consumeFast(window: ReceiveWindow, host: ReturnType<typeof loopbackHost>, rounds: number): number {
    let at = 1000;
    window.consumed(1, host, at);
    for (let i = 0; i < rounds; i++) {
      at += 1;
      consumeWindow(window, host, at);
      window.credit(window.size, host.windowBudget);
    }
    return at;
  }
  /** Consumes the rest of the window as one read at time `at` (our own clock, in ms). */
  function consumeWindow(window: ReceiveWindow, host: ReturnType<typeof loopbackHost>, at: number): void {
    window.consumed(window.size, host, at);
  }

  it('a window consumed within two 2 ms turnarounds doubles, though the measured round trip is 0.2 ms', () => {
    const host = loopbackHost(0.2);
    const window = new ReceiveWindow(initial);
    window.consumed(1, host, 1000); // starts the epoch
    consumeWindow(window, host, 1003.5); // the rest of the window 3.5 ms later: < 2 × 2 ms
    expect(window.size).toBe(2 * initial);
    expect(host.windowBudget.available).toBe(4096 * KiB - initial);
    // The growth rides on the next credit returned.
    expect(window.credit(initial, host.windowBudget)).toBe(2 * initial);
  });

  it('a window that takes between two and eight turnarounds neither grows nor shrinks', () => {
    const host = loopbackHost(0.2);
    const window = new ReceiveWindow(initial);
    window.consumed(1, host, 1000);
    consumeWindow(window, host, 1005); // 5 ms: more than 2 × 2 ms, though 25 × the measured 0.2 ms
    expect(window.size).toBe(initial);
    expect(host.windowBudget.available).toBe(4096 * KiB);
  });

  it('a grown window whose consumer slows past eight turnarounds halves and gives the budget back', () => {
    const host = loopbackHost(0.2);
    const window = new ReceiveWindow(initial);
    window.consumed(1, host, 1000);
    consumeWindow(window, host, 1001); // grows to 2 × initial
    expect(window.size).toBe(2 * initial);
    window.credit(initial, host.windowBudget);
    consumeWindow(window, host, 1030); // 29 ms for the grown window: > 8 × 2 ms
    expect(window.size).toBe(initial);
    // The withheld credit comes back short by the shrink, and with it the budget.
    expect(window.credit(2 * initial, host.windowBudget)).toBe(initial);
    expect(host.windowBudget.available).toBe(4096 * KiB);
  });

  it('grows to at most 4 MiB on such a path, and a reader that then stops keeps that budget until release', () => {
    const host = {
      rttMs: 0.2,
      maxStreamWindow: 16 * 1024 * KiB,
      windowBudget: new WindowBudget(64 * 1024 * KiB),
    };
    const window = new ReceiveWindow(initial);
    const at = consumeFast(window, host, 12);
    expect(window.size).toBe(4096 * KiB);
    expect(host.windowBudget.used).toBe(4096 * KiB - initial);
    // The reader stops: nothing completes an epoch, so nothing shrinks; the stream's end gives it all back.
    window.consumed(1, host, at + 60_000);
    expect(host.windowBudget.used).toBe(4096 * KiB - initial);
    window.release(host.windowBudget);
    expect(host.windowBudget.used).toBe(0);
  });

  it('on a measured path of 2 ms or more, windows still grow to maxStreamWindow', () => {
    const host = {
      rttMs: 20,
      maxStreamWindow: 16 * 1024 * KiB,
      windowBudget: new WindowBudget(64 * 1024 * KiB),
    };
    const window = new ReceiveWindow(initial);
    consumeFast(window, host, 12);
    expect(window.size).toBe(16 * 1024 * KiB);
  });

  it('does not tune before a round trip was measured', () => {
    const host = loopbackHost(0);
    const window = new ReceiveWindow(initial);
    window.consumed(1, host, 1000);
    consumeWindow(window, host, 1000.5);
    expect(window.size).toBe(initial);
  });
});
