import { afterEach, describe, expect, it, vi } from 'vitest';
import { ReceiveWindow } from '../src/receive-window.js';
import { WindowBudget } from '../src/window-budget.js';

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
