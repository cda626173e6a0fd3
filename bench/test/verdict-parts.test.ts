import { describe, expect, it } from 'vitest';
import type { StageReport } from '../src/plan/report-schema.js';
import { buildVerdict } from '../src/verdict/build-verdict.js';
import { kneeOf } from '../src/verdict/side-hold.js';
import { costSentence } from '../src/verdict/tunnel-cost.js';
import { VERDICT_RULES } from '../src/verdict/verdict-rules.js';
import { mergeWarnings, otherCpuPct, stageWarnings } from '../src/verdict/verdict-warnings.js';
import { input, stage, usage } from './support/verdict-report.js';

// The verdict's parts on reports built here (support/verdict-report.ts): the knees, the cost sentence, the
// warnings.

describe('kneeOf', () => {
  it('is null for a side that held nothing, and the later stage on a tie', () => {
    const stages = [stage(1, 100, {}, null), stage(2, 100, {}, null)];
    expect(kneeOf(stages, [null, null], 'direct')).toBeNull();
    const held = { held: true, bend: null, reason: '' };
    expect(kneeOf(stages, [held, held], 'direct')?.stage).toBe(2);
  });
});

describe('costSentence', () => {
  it('says the latency added, the CPU per request and the throughput kept', () => {
    const st = stage(
      2,
      200,
      { rps: 200, p50: 1, p99: 3 },
      { rps: 200, p50: 1.5, p99: 5, tunnelUs: 310, edge: usage(20, 0, 120), agent: usage(20, 0, 190) },
    );
    expect(costSentence(st)).toBe(
      'At 200 RPS (stage 2) the tunnel added +0.50 ms at p50 and +2.00 ms at p99, cost 310 µs of CPU per ' +
        "request (edge 120, agent 190), and kept 100.0 % of the direct side's throughput.",
    );
    expect(costSentence(stage(1, null, null, {}))).toBeNull();
  });

  it('marks a p99 from too few answers and a CPU that is not known', () => {
    const st = stage(1, null, { samples: 200 }, { samples: 200, tunnelUs: null, edge: null, agent: null });
    expect(costSentence(st)).toMatch(
      /^With 10 connections \(stage 1\) .* at p99 \(p99 from too few answers\), its CPU per request is not known/,
    );
  });
});

describe('warnings', () => {
  const context = { rules: VERDICT_RULES, targetGiven: false };
  const kinds = (st: StageReport, all: StageReport[] = [st]): string[] =>
    stageWarnings(st, all, context).map((w) => w.kind);

  it('too few samples for a p99', () => {
    expect(kinds(stage(1, 20, { samples: 100 }, {}))).toEqual(['low-samples']);
    expect(kinds(stage(1, 20, {}, {}))).toEqual([]);
  });

  it('an idle-dominated CPU per request: twice the cheapest stage at a lower rate, or under 10 clock ticks', () => {
    const low = stage(1, 10, { rps: 10 }, { rps: 10, tunnelUs: 900 });
    const high = stage(2, 1000, { rps: 1000 }, { rps: 1000, tunnelUs: 150 });
    expect(kinds(low, [low, high])).toEqual(['idle-cpu']);
    expect(kinds(high, [low, high])).toEqual([]);
    const coarse = stage(1, 10, {}, { edge: usage(0.5), agent: usage(0.5) });
    expect(stageWarnings(coarse, [coarse], context)[0]?.text).toContain('only 50 ms of CPU measured');
  });

  it('a busy machine: CPU used outside the run, with the load average before and after', () => {
    // 150 % busy, the run's own 10 + 10 + 20 + 20 = 60 %: 90 % of a core elsewhere.
    const busy = stage(1, 100, { busy: 80 }, { busy: 150 });
    expect(otherCpuPct(busy.tunnel!)).toBe(90);
    const [warning] = stageWarnings(busy, [busy], context);
    expect(warning?.kind).toBe('busy-machine');
    expect(warning?.text).toContain('90 % of a core outside the run during the tunnel side');
    expect(warning?.text).toContain('load average 0.50 before, 0.60 after');
    expect(kinds(stage(1, 100, { busy: 40 }, { busy: 70 }))).toEqual([]);
  });

  it('are merged by kind for the run, naming the stages', () => {
    const merged = mergeWarnings([
      { kind: 'low-samples', stages: [1], text: 'a' },
      { kind: 'low-samples', stages: [2], text: 'b' },
      { kind: 'idle-cpu', stages: [1], text: 'c' },
    ]);
    expect(merged.map((w) => [w.kind, w.stages])).toEqual([
      ['low-samples', [1, 2]],
      ['idle-cpu', [1]],
    ]);
  });

  it('the run says when only the tunnel side ran, or the tunnel is not the kit’s', () => {
    const verdict = buildVerdict(input([stage(1, 100, null, {})], { tunnelGiven: true }));
    expect(verdict.warnings.map((w) => w.kind)).toEqual(['no-direct-side', 'not-metered']);
  });
});
