import type { Clock } from '../src/index.js';

/** A clock the test moves by hand: no sleeps, no real time. */
export interface FakeClock {
  now: Clock;
  advance(ms: number): void;
}

export function createFakeClock(start = 1_700_000_000_000): FakeClock {
  let time = start;
  return {
    now: () => time,
    advance: (ms) => {
      if (!(ms >= 0)) throw new RangeError(`a fake clock only moves forward, got ${ms}`);
      time += ms;
    },
  };
}
