import { describe, expect, it } from 'vitest';
import { RoundTripMeter } from '../src/session/round-trip-meter.js';

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

  it('keeps the latest sample apart from the shortest, from the first ACK on', () => {
    const meter = new RoundTripMeter();
    expect(meter.lastMs).toBe(0);
    meter.acked(meter.nextPing());
    const first = meter.lastMs;
    expect(first).toBeGreaterThan(0);
    const start = performance.now();
    const ping = meter.nextPing();
    while (performance.now() - start < 2) {
      // Spin: the next sample is measurably longer than the first.
    }
    meter.acked(ping);
    expect(meter.lastMs).toBeGreaterThan(first);
    expect(meter.lastMs).toBeGreaterThanOrEqual(2);
  });
});
