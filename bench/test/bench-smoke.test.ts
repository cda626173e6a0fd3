import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, describe, expect, it } from 'vitest';
import type { BenchReport } from '../src/plan/report-schema.js';
import { runBench } from './support/run-bench.js';

// Every scenario, end to end, exactly as `pnpm bench` runs it (the built bench/dist/main.js, a real backend,
// edge and agent as child processes), with stages short enough to keep the kit from rotting cheaply.

const schema = JSON.parse(readFileSync(new URL('../report.schema.json', import.meta.url), 'utf8')) as object;
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
const validate = ajv.compile(schema);

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-smoke-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function readReports(out: string): { json: BenchReport; md: string; html: string } {
  const json = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as BenchReport;
  const valid = validate(json);
  expect(valid, JSON.stringify(validate.errors, null, 2)).toBe(true);
  return {
    json,
    md: readFileSync(join(out, 'report.md'), 'utf8'),
    html: readFileSync(join(out, 'report.html'), 'utf8'),
  };
}

function expectBothSidesServed(report: BenchReport): void {
  for (const stage of report.stages) {
    for (const side of [stage.direct!, stage.tunnel!]) {
      expect(side.requests).toBeGreaterThan(0);
      expect(side.ok).toBe(side.requests);
      expect(side.errors).toEqual({});
      expect(side.latencyMs.p50).toBeGreaterThan(0);
      expect(side.latencyMs.p99).toBeGreaterThanOrEqual(side.latencyMs.p50);
      expect(side.correctedP99Ms).toBeGreaterThanOrEqual(side.latencyMs.p99);
      expect(side.backend?.cpuMs).toBeGreaterThanOrEqual(0);
    }
    // The edge and the agent are measured as their own processes on the tunnel side only.
    expect(stage.tunnel!.edge!.peakRssMb).toBeGreaterThan(10);
    expect(stage.tunnel!.agent!.peakRssMb).toBeGreaterThan(10);
    expect(stage.tunnel!.agent!.cpuMs).toBeGreaterThan(0);
    // The tunnel's CPU per request is the edge's and the agent's CPU time over the finished requests.
    const tunnel = stage.tunnel!;
    const perRequest = ((tunnel.edge!.cpuMs + tunnel.agent!.cpuMs) * 1000) / tunnel.requests;
    expect(tunnel.tunnelCpuPerRequestUs).toBeCloseTo(perRequest, 0);
    expect(tunnel.agent!.cpuPerRequestUs).toBeCloseTo((tunnel.agent!.cpuMs * 1000) / tunnel.requests, 0);
    expect(stage.direct!.backend!.cpuPerRequestUs).toBeGreaterThanOrEqual(0);
    expect(stage.direct!.tunnelCpuPerRequestUs).toBeUndefined();
    expect(stage.direct!.edge).toBeUndefined();
    expect(stage.comparison).not.toBeNull();
  }
}

function expectRendered(md: string, html: string, stageCount: number): void {
  expect(md).toContain('## Per stage');
  expect(md).toContain('| # | load | side | achieved (req/s) |');
  expect(md).toContain('## Second by second');
  expect(md).toContain('## Tunnel cost (tunnel − direct)');
  expect(md).toContain('## Processes');
  expect(md).toContain('| tunnel CPU per request (edge + agent) |');
  expect(md).toMatch(/ µs\/req · /);
  // Self-contained: inline SVG charts, no script and nothing fetched.
  expect(html.startsWith('<!doctype html>')).toBe(true);
  expect(html).not.toMatch(/<script|<link|src="http/);
  const charts = html.match(/<svg [^>]*class="chart"/g) ?? [];
  // Latency per stage, achieved vs target, CPU per process; per stage its percentiles, and its latency and
  // rate second by second.
  expect(charts.length).toBe(3 + 3 * stageCount);
  expect(html).toContain('latency per second');
  expect(html).toContain('<path d="M');
  expect(html).toContain('<table>');
}

describe('bench scenarios (smoke)', () => {
  it('ramp: fixed-rate stages, direct and tunnel, reports in all three formats', async () => {
    const out = join(work, 'ramp');
    const run = await runBench([
      'ramp',
      '--stages',
      '20,40',
      '--duration',
      '1',
      '--warmup',
      '0.5',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(out);
    // Progress goes to stderr: stage k/n per side, and a line per finished stage.
    expect(run.stderr).toContain('[ramp] stage 2/2 tunnel done:');
    expect(run.stderr).toMatch(
      /stage 2\/2 tunnel done: .*, tunnel CPU \d+ µs\/req \(edge \d+ \+ agent \d+\)/,
    );
    expect(run.stderr).toMatch(/stage 2\/2 direct done: .*, backend CPU \d+ µs\/req/);
    const { json, md, html } = readReports(out);
    expect(json.scenario).toBe('ramp');
    expect(json.stages.map((s) => [s.mode, s.targetRps, s.connections])).toEqual([
      ['rate', 20, 2],
      ['rate', 40, 4],
    ]);
    expectBothSidesServed(json);
    for (const stage of json.stages) {
      for (const side of [stage.direct!, stage.tunnel!]) {
        expect(side.keptUp, side.shortfall ?? '').toBe(true);
        expect(side.achievedRps).toBeGreaterThan(0.9 * stage.targetRps!);
      }
    }
    expect(json.gate).toEqual({ failUnderPct: null, maxP99Ms: null, passed: true, violations: [] });
    // The verdict: a reading of every stage, in all three formats, and the machine around each side.
    expect(json.verdict!.stages.map((s) => s.index)).toEqual([1, 2]);
    expect(json.verdict!.warnings.map((w) => w.kind)).toContain('low-samples');
    for (const text of [md, html]) expect(text).toContain(json.verdict!.summary.slice(0, 40));
    // ...and on the terminal, after the stages, where a person running it looks first.
    expect(run.stderr).toContain(`verdict: ${json.verdict!.summary}`);
    expect(json.stages[0]!.tunnel!.machine!.loadAverageBefore).toBeGreaterThanOrEqual(0);
    expect(json.command).toBe(`pnpm bench ramp --stages 20,40 --duration 1 --warmup 0.5 --out ${out}`);
    // --warmup given: before the first stage only, as it always was; every stage says what it had.
    expect(json.stages.map((s) => s.warmupSec)).toEqual([0.5, 0]);
    expect(json.settings.warmupSec).toBe(0.5);
    expect(json.settings.warmupRule).toBe(
      '--warmup 0.5: 0.5 s before the first stage on each side, at its load',
    );
    for (const stage of json.stages) {
      for (const side of [stage.direct!, stage.tunnel!]) {
        // Every answer is in the seconds, and 20-40 answers are too few for a p99.
        expect(side.perSecond!.reduce((sum, p) => sum + p.requests, 0)).toBe(side.requests);
        expect(side.latencySamples).toBe(side.requests);
        expect(side.lowSamplePercentiles).toContain('p99');
      }
    }
    expectRendered(md, html, 2);
  });

  it('spike: a failed --max-p99 gate exits 1 and says why in every report', async () => {
    const out = join(work, 'spike');
    const run = await runBench([
      'spike',
      '--rates',
      '50',
      '--duration',
      '1',
      '--warmup',
      '0',
      '--out',
      out,
      '--fail-under',
      '99',
      '--max-p99',
      '0.001',
    ]);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('bench: gate failed');
    const { json, md, html } = readReports(out);
    expect(json.scenario).toBe('spike');
    expectBothSidesServed(json);
    expect(json.gate.passed).toBe(false);
    expect(json.gate.violations).toHaveLength(1);
    expect(json.gate.violations[0]).toMatch(
      /^stage 1 \(50 RPS\) tunnel: corrected p99 .* > --max-p99 0.001 ms$/,
    );
    // About 50 answers: the p99 the gate compared is their slowest, and the violation says so.
    expect(json.gate.violations[0]).toMatch(/ \(~ from \d+ answers: too few for a p99\) > /);
    expect(md).toContain('**Gate: FAILED**');
    expect(html).toContain('Gate: FAILED');
    expectRendered(md, html, 1);
  });

  it('constant: one rate for a fraction of a minute', async () => {
    const out = join(work, 'constant');
    const run = await runBench([
      'constant',
      '--rate',
      '30',
      '--minutes',
      '0.02',
      '--warmup',
      '0',
      '--out',
      out,
      '--fail-under',
      '99',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md, html } = readReports(out);
    expect(json.stages).toHaveLength(1);
    expect(json.stages[0]!.durationSec).toBeCloseTo(1.2);
    expectBothSidesServed(json);
    expect(json.gate.passed).toBe(true);
    expectRendered(md, html, 1);
  });

  it('max: closed-loop stages per connection count, with the tunnel/direct throughput ratio', async () => {
    const out = join(work, 'max');
    const run = await runBench([
      'max',
      '--connections',
      '2,4',
      '--duration',
      '1',
      '--warmup',
      '0.5',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md, html } = readReports(out);
    expect(json.stages.map((s) => [s.mode, s.targetRps, s.connections])).toEqual([
      ['closed', null, 2],
      ['closed', null, 4],
    ]);
    expectBothSidesServed(json);
    for (const stage of json.stages) {
      expect(stage.comparison!.throughputRatio).toBeGreaterThan(0);
      expect(stage.tunnel!.correctedP99Ms).toBe(stage.tunnel!.latencyMs.p99);
    }
    expect(md).toContain('throughput tunnel/direct');
    expectRendered(md, html, 2);
  });

  it('max --inspect both: the tunnel side with the inspector off and on, side by side with the ratio', async () => {
    const out = join(work, 'inspect-both');
    const run = await runBench([
      'max',
      '--connections',
      '2,2',
      '--duration',
      '1',
      '--warmup',
      '0.5',
      '--only',
      'tunnel',
      '--inspect',
      'both',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md, html } = readReports(out);
    expect(json.settings.inspect).toBe('both');
    const stage = json.stages[0]!;
    for (const side of [stage.tunnel!, stage.tunnelInspectorOff!]) {
      expect(side.requests).toBeGreaterThan(0);
      expect(side.ok).toBe(side.requests);
      expect(side.agent!.cpuMs).toBeGreaterThan(0);
    }
    const cost = stage.inspectorCost!;
    expect(cost.throughputRatio).toBeCloseTo(
      stage.tunnel!.achievedRps / stage.tunnelInspectorOff!.achievedRps,
      2,
    );
    expect(cost.agentCpuRatio).toBeCloseTo(
      stage.tunnel!.agent!.cpuPerRequestUs! / stage.tunnelInspectorOff!.agent!.cpuPerRequestUs!,
      2,
    );
    expect(cost.tunnelCpuRatio).toBeGreaterThan(0);
    expect(md).toContain("## The agent's request inspector (off → on)");
    expect(md).toContain('| agent CPU/req off → on |');
    // Repeats of one load: the two tunnel legs take turns going first, and the table ends with the median.
    const order = [...run.stderr.matchAll(/stage (\d)\/2 (tunnel(?: \(inspector off\))?) done/g)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(order).toEqual(['1 tunnel (inspector off)', '1 tunnel', '2 tunnel', '2 tunnel (inspector off)']);
    expect(json.stages[1]!.inspectorCost).not.toBeNull();
    expect(md).toMatch(/\| median +\| 2 stages /);
    expect(html).toContain("The agent's request inspector (off → on)");
  });

  it('--only direct starts no edge or agent; a bad flag exits 2 before starting anything', async () => {
    const out = join(work, 'direct');
    const run = await runBench([
      'max',
      '--connections',
      '1',
      '--duration',
      '0.5',
      '--warmup',
      '0',
      '--only',
      'direct',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json } = readReports(out);
    expect(json.settings.sides).toEqual(['direct']);
    expect(json.settings.tunnelUrl).toBeNull();
    expect(json.stages[0]!.tunnel).toBeNull();
    expect(json.totals.tunnel).toBeNull();

    const bad = await runBench(['ramp', '--stages', '20,fast', '--out', join(work, 'never')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^bench: --stages "20,fast" is not a comma-separated list of positive integers\n/,
    );
    expect(existsSync(join(work, 'never'))).toBe(false);
  });
});
