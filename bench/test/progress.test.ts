import { describe, expect, it } from 'vitest';
import type { SideReport } from '../src/plan/report-schema.js';
import { lowSamplePercentiles } from '../src/plan/sample-sufficiency.js';
import type { StagePlan } from '../src/plan/scenarios.js';
import { createProgress } from '../src/runs/progress.js';

// The line each finished stage prints on stderr: what a person watching the run reads before any report.

const stage: StagePlan = { index: 1, mode: 'rate', targetRps: 20, connections: 2, durationSec: 3 };

function side(requests: number): SideReport {
  const latency = {
    min: 0.4,
    mean: 0.6,
    p50: 0.5,
    p75: 0.6,
    p90: 0.9,
    p95: 1,
    p99: 1.29,
    p999: 1.29,
    max: 1.29,
  };
  return {
    requests,
    ok: requests,
    errors: {},
    successPct: 100,
    sent: requests,
    missedSlots: 0,
    offeredRps: 20,
    achievedRps: 20.3,
    durationSec: 3,
    bytes: requests * 100,
    latencyMs: latency,
    correctedLatencyMs: latency,
    correctedP99Ms: 1.29,
    latencySamples: requests,
    lowSamplePercentiles: lowSamplePercentiles(requests),
    keptUp: true,
    shortfall: null,
    backend: null,
    generator: { cpuMs: 10, cpuPct: 5, peakRssMb: 80, cpuPerRequestUs: 20, eventLoopDelayP99Ms: 1 },
  };
}

function doneLine(requests: number): string {
  const out: string[] = [];
  createProgress('ramp', { write: (text) => out.push(text), interactive: false }).stageDone(
    stage,
    6,
    'direct',
    side(requests),
  );
  return out.join('');
}

describe('the stage-done progress line', () => {
  it('marks a p99 read from too few samples as the reports do, saying how many it had', () => {
    const line = doneLine(61);
    expect(line).toContain('p50 0.50 ms, p99 1.29 ms ~ (corrected 1.29 ms ~; 61 answers, a p99 needs 1,000)');
  });

  it('prints the p99 unmarked when there were enough answers', () => {
    const line = doneLine(3000);
    expect(line).toContain('p50 0.50 ms, p99 1.29 ms (corrected 1.29 ms)');
    expect(line).not.toContain('~');
  });
});
