import { describe, expect, it } from 'vitest';
import {
  LOW_SAMPLE_NOTE,
  lowSamplePercentiles,
  samplesNeeded,
  tooFewSamples,
} from '../src/plan/sample-sufficiency.js';

// A percentile read from n samples is flagged when fewer than 10 lie beyond it: n · (1 − p) < 10.

describe('too few samples for a percentile', () => {
  it('flags p99 below 1,000 samples and not from 1,000 on (the 61-request stage whose p99 was its max)', () => {
    expect(tooFewSamples('p99', 61)).toBe(true);
    expect(tooFewSamples('p99', 999)).toBe(true);
    expect(tooFewSamples('p99', 1000)).toBe(false);
    expect(samplesNeeded('p99')).toBe(1000);
  });

  it('holds exactly at each boundary, where floating point would put 100 · 0.1 at 9.999…', () => {
    const needed = { p50: 20, p75: 40, p90: 100, p95: 200, p99: 1000, p999: 10_000 } as const;
    for (const [key, n] of Object.entries(needed) as [keyof typeof needed, number][]) {
      expect(samplesNeeded(key), key).toBe(n);
      expect(tooFewSamples(key, n), `${key} at ${n}`).toBe(false);
      expect(tooFewSamples(key, n - 1), `${key} at ${n - 1}`).toBe(true);
    }
  });

  it('lists the flagged percentiles of a sample count, and every one of none', () => {
    expect(lowSamplePercentiles(61)).toEqual(['p90', 'p95', 'p99', 'p999']);
    expect(lowSamplePercentiles(250)).toEqual(['p99', 'p999']);
    expect(lowSamplePercentiles(10_000)).toEqual([]);
    expect(lowSamplePercentiles(0)).toEqual(['p50', 'p75', 'p90', 'p95', 'p99', 'p999']);
    expect(lowSamplePercentiles(500, ['p50', 'p99'])).toEqual(['p99']);
  });

  it('states its rule in the footnote the reports print', () => {
    expect(LOW_SAMPLE_NOTE).toContain('n · (1 − p) < 10');
    expect(LOW_SAMPLE_NOTE).toContain('p99 1,000');
  });
});
