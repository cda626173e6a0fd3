import { describe, expect, it } from 'vitest';
import { createSecondSeries } from '../src/measure/second-series.js';

// The per-second record of a stage, fed with explicit completion times (ms, as performance.now() gives).

describe('second-by-second series', () => {
  it('puts each answer in the second it completed in, with that second’s rate, errors, p50 and p99', () => {
    const series = createSecondSeries(1000);
    // Second 0: 100 answers of 1..100 ms, two of them with an unexpected status, and one timeout.
    for (let i = 1; i <= 100; i++) series.response(i, i > 2, 1000 + i * 5);
    series.failed(1, 1900);
    // Second 1: 2000 answers of 2 ms.
    for (let i = 0; i < 2000; i++) series.response(2, true, 2000 + i * 0.4);
    const points = series.finish(3000);
    expect(points).toHaveLength(2);
    const [first, second] = points;
    expect(first).toMatchObject({ second: 0, durationSec: 1, requests: 101, errors: 3, achievedRps: 101 });
    expect(first!.p50Ms).toBeCloseTo(50, 0);
    expect(first!.p99Ms).toBeCloseTo(99, 0);
    // 100 answers are too few for a p99 (1,000 needed), not for a p50 (20).
    expect(first!.lowSamplePercentiles).toEqual(['p99']);
    expect(second).toMatchObject({ second: 1, requests: 2000, errors: 0, achievedRps: 2000 });
    expect(second!.p99Ms).toBeCloseTo(2, 1);
    expect(second!.lowSamplePercentiles).toEqual([]);
  });

  it('shows a stall: seconds with nothing finished are points with rate 0 and no latency', () => {
    const series = createSecondSeries(0);
    series.response(1, true, 100);
    // Nothing for three seconds, then the stalled answer arrives.
    series.response(3500, true, 3600);
    const points = series.finish(4000);
    expect(points.map((p) => p.requests)).toEqual([1, 0, 0, 1]);
    expect(points[1]).toMatchObject({ achievedRps: 0, p50Ms: null, p99Ms: null, lowSamplePercentiles: [] });
    expect(points[3]!.p99Ms).toBeCloseTo(3500, -1);
  });

  it('keeps a last partial second with its own length and rate, and drops a sliver with nothing in it', () => {
    const kept = createSecondSeries(0);
    for (let i = 0; i < 50; i++) kept.response(1, true, 1000 + i);
    const keptPoints = kept.finish(1500);
    expect(keptPoints.at(-1)).toMatchObject({ second: 1, durationSec: 0.5, requests: 50, achievedRps: 100 });

    const sliver = createSecondSeries(0);
    sliver.response(1, true, 10);
    expect(sliver.finish(1050)).toHaveLength(1);
  });

  it('holds one point per second whatever the request count (bounded memory)', () => {
    const series = createSecondSeries(0);
    const perSecond = 400_000;
    for (let s = 0; s < 3; s++) {
      for (let i = 0; i < perSecond; i++) series.response(0.2 + (i % 100) / 100, true, s * 1000 + i / 400);
      expect(series.closedSeconds).toBe(s);
    }
    const points = series.finish(3000);
    expect(points).toHaveLength(3);
    expect(points.reduce((sum, p) => sum + p.requests, 0)).toBe(3 * perSecond);
    expect(points[2]!.p50Ms).toBeCloseTo(0.7, 1);
  });
});
