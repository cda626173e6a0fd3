import { describe, expect, it } from 'vitest';
import type { BenchReport, SecondPoint, SideReport, StageReport } from '../src/plan/report-schema.js';
import { lowSamplePercentiles } from '../src/plan/sample-sufficiency.js';
import { planWarmup, proportionalWarmupSec, warmupGiven } from '../src/plan/warmup-plan.js';
import { renderHtml } from '../src/reports/report-html.js';
import { renderMarkdown } from '../src/reports/report-md.js';
import { renderBulkMarkdown } from '../src/reports/standalone-report-md.js';
import { type BulkTransfer, bulkRatios } from '../src/scenarios/bulk-scenario.js';
import { buildVerdict } from '../src/verdict/build-verdict.js';

// report.md and report.html from a report built here: what a reader sees of the per-second record, of a
// percentile read from too few samples, of the units and of each stage's warm-up.

const latency = (p50: number, p99: number, max: number): SideReport['latencyMs'] => ({
  min: p50 / 2,
  mean: p50,
  p50,
  p75: p50,
  p90: p99,
  p95: p99,
  p99,
  p999: max,
  max,
});

/** `seconds` whole seconds at `rate`, the `stallAt` one (if any) with a tenth of the rate and a 900 ms p99. */
function seconds(count: number, rate: number, stallAt: number | null): SecondPoint[] {
  return Array.from({ length: count }, (_, second) => {
    const stalled = second === stallAt;
    const requests = stalled ? rate / 10 : rate;
    return {
      second,
      durationSec: 1,
      requests,
      errors: 0,
      achievedRps: requests,
      p50Ms: stalled ? 400 : 1,
      p99Ms: stalled ? 900 : 3,
      lowSamplePercentiles: lowSamplePercentiles(requests, ['p50', 'p99']),
    };
  });
}

function side(requests: number, perSecond: SecondPoint[], tunnel: boolean): SideReport {
  const report: SideReport = {
    requests,
    ok: requests,
    errors: {},
    successPct: 100,
    sent: requests,
    missedSlots: 0,
    offeredRps: requests / perSecond.length,
    achievedRps: requests / perSecond.length,
    durationSec: perSecond.length,
    bytes: requests * 100,
    latencyMs: latency(1, 3, 900),
    correctedLatencyMs: latency(1, 3, 900),
    correctedP99Ms: 3,
    latencySamples: requests,
    lowSamplePercentiles: lowSamplePercentiles(requests),
    keptUp: true,
    shortfall: null,
    backend: { cpuMs: 10, cpuPct: 5, peakRssMb: 50, cpuPerRequestUs: 20 },
    generator: { cpuMs: 10, cpuPct: 5, peakRssMb: 80, cpuPerRequestUs: 20, eventLoopDelayP99Ms: 1 },
    perSecond,
  };
  if (tunnel) {
    report.edge = { cpuMs: 10, cpuPct: 5, peakRssMb: 60, cpuPerRequestUs: 20 };
    report.agent = { cpuMs: 10, cpuPct: 5, peakRssMb: 60, cpuPerRequestUs: 20 };
    report.tunnelCpuPerRequestUs = 40;
  }
  return report;
}

function stage(index: number, rate: number, durationSec: number, stallAt: number | null): StageReport {
  const direct = side(rate * durationSec, seconds(durationSec, rate, null), false);
  const tunnel = side(rate * durationSec, seconds(durationSec, rate, stallAt), true);
  return {
    index,
    mode: 'rate',
    targetRps: rate,
    connections: Math.ceil(rate / 10),
    durationSec,
    warmupSec: proportionalWarmupSec(durationSec),
    direct,
    tunnel,
    comparison: {
      throughputRatio: 1,
      addedP50Ms: 0,
      addedP99Ms: 0,
      addedCorrectedP99Ms: 0,
      p50Ratio: 1,
      p99Ratio: 1,
    },
  };
}

function report(): BenchReport {
  // Stage 1: 61 requests (the stage whose p99 was its max); stage 2: 30 s at 1,000 RPS, a stall at 12 s.
  const stages = [stage(1, 61, 1, null), stage(2, 1000, 30, 12)];
  return {
    schemaVersion: 1,
    scenario: 'ramp',
    command: 'pnpm bench ramp --stages 61,1000',
    startedAt: '2026-11-28T15:00:00.000Z',
    finishedAt: '2026-11-28T15:01:00.000Z',
    environment: {
      node: 'v24.0.0',
      platform: 'linux',
      arch: 'x64',
      cpus: 2,
      cpuModel: 'test',
      totalMemoryMb: 4096,
      tunnel2: '0.0.0',
      autocannon: '9.0.0',
    },
    settings: {
      path: '/',
      warmupSec: 1,
      warmupRule: planWarmup(null).rule,
      timeoutSec: 10,
      sides: ['direct', 'tunnel'],
      backendUrl: 'http://127.0.0.1:1',
      tunnelUrl: 'http://bench.localhost:2',
      inspect: 'on',
    },
    stages,
    aborted: null,
    totals: { direct: null, tunnel: null },
    gate: { failUnderPct: null, maxP99Ms: null, passed: true, violations: [] },
  };
}

describe('report.html', () => {
  const html = renderHtml(report());
  const svgs = html.match(/<svg [^>]*>/g) ?? [];

  it('draws every chart to the page width: a viewBox, width 100 % and no fixed height', () => {
    expect(svgs.length).toBeGreaterThan(0);
    for (const svg of svgs) {
      expect(svg).toMatch(/viewBox="0 0 \d+ \d+"/);
      expect(svg).toContain('width="100%"');
      expect(svg).not.toMatch(/ height="/);
    }
    expect(html).not.toContain('max-width: 1200px');
  });

  it('has a latency and a rate chart per stage, second by second, with both sides overlaid', () => {
    for (const index of [1, 2]) {
      const latencyChart = svgs.find(
        (svg) => svg.includes(`Stage ${index} `) && svg.includes('latency per second'),
      );
      const rateChart = svgs.find(
        (svg) => svg.includes(`Stage ${index} `) && svg.includes('rate per second'),
      );
      expect(latencyChart, `stage ${index} latency`).toBeDefined();
      expect(rateChart, `stage ${index} rate`).toBeDefined();
    }
    const stage2 = html.slice(
      html.indexOf('aria-label="Stage 2 · 1000 RPS (after 3 s warm-up): latency per second'),
    );
    const chart = stage2.slice(0, stage2.indexOf('</svg>'));
    // The stalled second had 100 answers: too few for its p99, so the tunnel's p99 series carries the mark.
    for (const name of ['direct p50', 'direct p99', 'tunnel p50', 'tunnel p99 ~']) {
      expect(chart).toContain(`class="legend">${name}</text>`);
    }
  });

  it('names in a legend only the series that have data', () => {
    // No stage had an error: the rate charts' error series are empty and must not be listed.
    expect(html).not.toContain('class="legend">tunnel errors<');
    expect(html).not.toContain('class="legend">direct errors<');
    const rate = html.slice(
      html.indexOf('aria-label="Stage 2 · 1000 RPS (after 3 s warm-up): achieved rate'),
    );
    const legend = [...rate.slice(0, rate.indexOf('</svg>')).matchAll(/class="legend">([^<]*)</g)].map(
      (m) => m[1],
    );
    expect(legend).toEqual(['target', 'direct', 'tunnel']);
  });

  it('marks a percentile read from too few samples, says the rule, and gives units in the headers', () => {
    expect(html).toContain('<th>p99 (ms)</th>');
    expect(html).toContain('<th>achieved (req/s)</th>');
    expect(html).toContain('<th>warm-up (s)</th>');
    // Stage 1's 61 requests: its p99 (3 ms) is marked, stage 2's 30,000 are not.
    expect(html).toMatch(/<td>3\.00 ~<\/td>/);
    expect(html).toContain('n · (1 − p) &#60; 10');
    expect(html).toContain('p99 ~');
  });

  it('says how long the warm-up was', () => {
    expect(html).toContain('warm-up: 10 % of each stage, 1–10 s');
    expect(html).toContain('(after 3 s warm-up)');
  });
});

describe('report.md', () => {
  const md = renderMarkdown(report());
  const row = (prefix: string, section = '## Per stage'): string =>
    md
      .slice(md.indexOf(section))
      .split('\n')
      .find((line) => line.startsWith(prefix)) ?? '';

  it('gives units in column headers', () => {
    expect(md).toContain(
      '| # | load | side | achieved (req/s) | requests | success (%) | errors | min (ms) |',
    );
    expect(md).toContain('| p99 (ms) | p99.9 (ms) | max (ms) | p99 corrected (ms) |');
  });

  it('marks p99 = max of a 61-request stage and states the rule under the table', () => {
    const stage1 = row('| 1 | 61 RPS | tunnel |');
    expect(stage1).toContain('| 3.00 ~ | 900 ~ | 900 | 3.00 ~ |');
    const stage2 = row('| 2 | 1000 RPS | tunnel |');
    expect(stage2).not.toContain('~');
    expect(md).toContain('~ = too few samples for this percentile: fewer than 10 lie beyond it');
  });

  it("summarises each stage's seconds: the stall's p99 and rate, when, and the warm-up", () => {
    expect(md).toContain('## Second by second');
    expect(md).toContain(
      '| # | load | side | warm-up (s) | seconds | median second p99 (ms) | worst second p99 (ms) | at (s) | lowest second rate (req/s) | at (s) | seconds with errors |',
    );
    expect(row('| 2 | 1000 RPS | tunnel |', '## Second by second')).toContain(
      '| 3 | 30.0 | 3.00 | 900 ~ | 12 | 100 | 12 | 0 |',
    );
    expect(row('| 2 | 1000 RPS | direct |', '## Second by second')).toContain(
      '| 3 | 30.0 | 3.00 | 3.00 | 0 | 1000 | 0 | 0 |',
    );
  });
});

describe('the verdict', () => {
  const withVerdict = (): BenchReport => {
    const r = report();
    r.verdict = buildVerdict(r);
    return r;
  };

  it('opens report.md, before the totals: the reading, the cost sentence, a row per stage, the rules', () => {
    const md = renderMarkdown(withVerdict());
    const verdict = md.indexOf('## Verdict');
    expect(verdict).toBeGreaterThan(0);
    expect(verdict).toBeLessThan(md.indexOf('## Totals'));
    expect(md).toContain(
      '**Nothing saturated up to the last stage, stage 2 (1000 RPS): every side held every stage.',
    );
    expect(md).toContain('Tunnel cost: At 1000 RPS (stage 2) the tunnel added +0.00 ms at p50');
    expect(md).toContain(
      '| # | load | direct | tunnel | saturated | reading | machine (load avg · busy CPU) |',
    );
    expect(md).toContain('| 1 | 61 RPS | held | held | none | direct and tunnel held the stage | – |');
    // Stage 1's 61 answers: the warning names them and says what it means.
    expect(md).toContain(
      '- ⚠ stage 1: p99 read from 61 (direct), 61 (tunnel) answers: a p99 needs 1,000 answers',
    );
    expect(md).toContain('A side held a stage when it achieved ≥ 99 % of the target');
  });

  it('opens report.html the same way, escaped', () => {
    const html = renderHtml(withVerdict());
    expect(html.indexOf('<h2>Verdict</h2>')).toBeLessThan(html.indexOf('<h2>Charts</h2>'));
    // The summary carries why a run stopped, which names a process that died: text, never markup.
    const stopped = report();
    stopped.aborted = 'the backend <img src=x onerror=alert(1)> exited';
    stopped.verdict = buildVerdict(stopped);
    const escaped = renderHtml(stopped);
    expect(escaped).toMatch(
      /The run stopped early \(the backend &(lt|#60);img src=x onerror=alert\(1\)&(gt|#62); exited\)/,
    );
    expect(escaped).not.toContain('<img');
    expect(html).toContain('<p class="verdict">Nothing saturated up to the last stage');
    expect(html).toContain('<th>machine (load avg · busy CPU)</th>');
  });

  it('is absent from a report written before the kit had one', () => {
    expect(renderMarkdown(report())).not.toContain('## Verdict');
    expect(renderHtml(report())).not.toContain('<h2>Verdict</h2>');
  });
});

describe('warm-up', () => {
  it('is 10 % of the stage, between 1 and 10 s, unless --warmup was given', () => {
    expect([0.5, 5, 30, 45, 120, 600].map(proportionalWarmupSec)).toEqual([1, 1, 3, 4.5, 10, 10]);
    const plan = (index: number, durationSec: number) => ({
      index,
      mode: 'rate' as const,
      targetRps: 10,
      connections: 1,
      durationSec,
    });
    const auto = planWarmup(null);
    expect([auto.secondsFor(plan(1, 30)), auto.secondsFor(plan(2, 60))]).toEqual([3, 6]);
    const given = planWarmup(5);
    expect([given.secondsFor(plan(1, 30)), given.secondsFor(plan(2, 30))]).toEqual([5, 0]);
    expect(warmupGiven(['ramp', '--warmup', '0'])).toBe(true);
    expect(warmupGiven(['ramp', '--warmup=2'])).toBe(true);
    expect(warmupGiven(['ramp', '--warmup-mib', '2'])).toBe(false);
  });
});

describe('bulk report.md', () => {
  const trace = { startMb: 50, peakMb: 80, endMb: 80, cpuMs: 700 };
  const transfer = (
    direction: BulkTransfer['direction'],
    side: BulkTransfer['side'],
    mbPerSec: number,
    error: string | null = null,
  ): BulkTransfer => ({
    direction,
    side,
    bytes: error === null ? 2 ** 30 : 2 ** 29,
    seconds: 2 ** 30 / mbPerSec / 1e6,
    mbPerSec,
    error,
    warmup: { bytes: 2 ** 27, mbPerSec: mbPerSec / 2, error: null },
    edge: side === 'direct' ? null : trace,
    agent: side === 'direct' ? null : trace,
    backend: trace,
    clientCpuMs: 250,
  });
  const transfers = [
    transfer('download', 'direct', 2000),
    transfer('download', 'relay', 800),
    transfer('download', 'tunnel', 700),
    transfer('upload', 'direct', 2400),
    transfer('upload', 'relay', 400, 'the connection closed after 536870912 of 1073741824 body bytes'),
    transfer('upload', 'tunnel', 600),
  ];
  const md = renderBulkMarkdown({
    command: 'pnpm bench bulk',
    startedAt: '2026-11-29T04:00:00.000Z',
    environment: report().environment,
    result: {
      scenario: 'bulk',
      bytes: 2 ** 30,
      warmupBytes: 2 ** 27,
      cold: false,
      transfers,
      ratios: bulkRatios(transfers),
    },
    gate: { passed: false, violations: ['upload relay: the connection closed'] },
  });

  it('puts tunnel / byte floor beside tunnel / direct for each direction, from the same run', () => {
    expect(md).toContain(
      '- download: tunnel / direct = 0.35×, tunnel / byte floor = 0.88×, byte floor / direct = 0.40×\n',
    );
    expect(md).toContain('| download | relay | 1024 MiB |');
  });

  it('leaves out a ratio whose side lost data, rather than reading it from a short transfer', () => {
    expect(bulkRatios(transfers).upload).toEqual({
      tunnelOverDirect: 0.25,
      tunnelOverFloor: null,
      floorOverDirect: null,
    });
    expect(md).toContain('- upload: tunnel / direct = 0.25×\n');
  });
});
