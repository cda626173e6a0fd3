import { afterEach, describe, expect, it, vi } from 'vitest';
import { StartupGrace } from '../src/public/startup-grace.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('StartupGrace', () => {
  it('opens when the edge listens and closes once the grace has passed: then an unknown name is a 404 again', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const grace = new StartupGrace(30_000);
    expect(grace.active).toBe(false); // not listening yet
    grace.start();
    expect(grace.active).toBe(true);
    vi.advanceTimersByTime(29_999);
    expect(grace.active).toBe(true);
    vi.advanceTimersByTime(1);
    expect(grace.active).toBe(false);
    expect(grace.enter()).toBe(false);
  });

  it('is never open with a grace of 0', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const grace = new StartupGrace(0);
    grace.start();
    expect(grace.active).toBe(false);
    expect(grace.enter()).toBe(false);
  });

  it('bounds the requests waiting at once across all names; one that leaves makes room', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const grace = new StartupGrace(30_000, 2);
    grace.start();
    expect([grace.enter(), grace.enter(), grace.enter()]).toEqual([true, true, false]);
    expect(grace.waiting).toBe(2);
    grace.leave();
    expect(grace.enter()).toBe(true);
    expect(grace.waiting).toBe(2);
  });
});
