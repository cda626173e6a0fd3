import { describe, expect, it } from 'vitest';
import { RoundTripMeter } from '../src/round-trip-meter.js';

describe('RoundTripMeter', () => {
  it('reports the shortest of three startup samples, and only then', () => {
    const meter = new RoundTripMeter();
    expect(meter.acked(meter.nextPing())).toBe(true);
    expect(meter.rttMs).toBe(0);
    expect(meter.acked(meter.nextPing())).toBe(true);
    expect(meter.acked(meter.nextPing())).toBe(false);
    expect(meter.rttMs).toBeGreaterThan(0);
  });

  it('times one PING at a time and ignores an ACK it did not time', () => {
    const meter = new RoundTripMeter();
    const timed = meter.nextPing();
    const untimed = meter.nextPing();
    expect(timed.length).toBe(8);
    expect(timed.equals(untimed)).toBe(false);
    expect(meter.acked(untimed)).toBe(false);
    expect(meter.acked(timed)).toBe(true);
    // Answered once: a duplicate ACK is not a second sample.
    expect(meter.acked(timed)).toBe(false);
  });
});
