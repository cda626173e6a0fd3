import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderCompareHtml } from '../src/compare/compare-html.js';
import { renderCompareMarkdown } from '../src/compare/compare-markdown.js';
import { type ComparedFigure, compareReports, DEFAULT_MAX_REGRESS_PCT } from '../src/compare/comparison.js';
import { reportFigures } from '../src/compare/figures.js';
import { type LoadedReport, loadPair, loadReport, ReportInputError } from '../src/compare/report-input.js';
import { BenchErrorCode } from '../src/errors.js';
import { runBench } from './support/run-bench.js';
import {
  bulkResult,
  clusterResult,
  floorResult,
  type StagedFigures,
  sessionsResult,
  sideBySideResult,
  stagedReport,
  standaloneReport,
  tcpResult,
  wanResult,
} from './support/synthetic-reports.js';

// `pnpm bench compare` on synthetic report.json pairs of every scenario family: which figures it matches,
// the noise band it reads from the reports, the regressions --max-regress finds, its errors and exit codes.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-compare-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const loaded = (json: Record<string, unknown>): LoadedReport => ({
  file: 'report.json',
  scenario: String(json.scenario),
  schemaVersion: 1,
  command: null,
  startedAt: null,
  json,
});

const compare = (
  base: Record<string, unknown>,
  head: Record<string, unknown>,
  max = DEFAULT_MAX_REGRESS_PCT,
) => compareReports(loaded(base), loaded(head), max);

const keys = (figures: readonly ComparedFigure[]): string[] => figures.map((f) => f.key);

const steady: StagedFigures = { p99: 5, rps: 200, edgeCpu: 300, agentCpu: 300, edgeRss: 80 };
const direct: StagedFigures = { p99: 2, rps: 200, edgeCpu: 0, agentCpu: 0, edgeRss: 0 };
const ramp = (tunnel: StagedFigures, extra?: Record<string, unknown>) =>
  stagedReport('ramp', [{ rate: 200, connections: 20, direct, tunnel }], extra);

describe('staged scenarios (ramp, spike, constant, max)', () => {
  it('names each figure by stage load, side and field', () => {
    const figures = reportFigures(ramp(steady));
    expect(figures.get('stages[rate 200 req/s 20 conn].tunnel.tunnelCpuPerRequestUs')).toMatchObject({
      value: 600,
      kind: 'cpu',
    });
    expect(figures.get('stages[rate 200 req/s 20 conn].tunnel.correctedP99Ms')?.kind).toBe('p99');
    expect(figures.get('stages[rate 200 req/s 20 conn].direct.achievedRps')?.kind).toBe('throughput');
    expect(figures.get('stages[rate 200 req/s 20 conn].tunnel.edge.peakRssMb')?.kind).toBe('rss');
    // Ratios of two figures, identities and the run's settings are not figures of their own kind.
    expect(figures.get('stages[rate 200 req/s 20 conn].comparison.p99Ratio')?.kind).toBe('other');
    expect([...figures.keys()].some((k) => /targetRps|settings|environment|gate|perSecond/.test(k))).toBe(
      false,
    );
  });

  it('the same figures: no regression, nothing beyond the noise', () => {
    const c = compare(ramp(steady), ramp(steady));
    expect(c.passed).toBe(true);
    expect(c.figures.length).toBeGreaterThan(40);
    expect(c.figures.filter((f) => f.beyondNoise)).toEqual([]);
  });

  it('the tunnel CPU per request 50 % up: a regression at the default threshold, named', () => {
    const c = compare(ramp(steady), ramp({ ...steady, edgeCpu: 450, agentCpu: 450 }));
    expect(c.passed).toBe(false);
    expect(keys(c.regressions)).toEqual([
      'stages[rate 200 req/s 20 conn].tunnel.edge.cpuPerRequestUs',
      'stages[rate 200 req/s 20 conn].tunnel.agent.cpuPerRequestUs',
      'stages[rate 200 req/s 20 conn].tunnel.tunnelCpuPerRequestUs',
    ]);
    expect(c.regressions[2]?.changePct).toBeCloseTo(50, 5);
    // Under a higher threshold it is still marked worse (beyond the noise), not a regression.
    const lenient = compare(ramp(steady), ramp({ ...steady, edgeCpu: 450, agentCpu: 450 }), 60);
    expect(lenient.passed).toBe(true);
    expect(lenient.figures.find((f) => f.key.endsWith('tunnel.tunnelCpuPerRequestUs'))?.mark).toBe('worse');
  });

  it('each gated kind in the direction that is worse for it', () => {
    const slower = compare(ramp(steady), ramp({ ...steady, rps: 120 }));
    expect(keys(slower.regressions)).toContain('stages[rate 200 req/s 20 conn].tunnel.achievedRps');
    const faster = compare(ramp(steady), ramp({ ...steady, rps: 300, edgeCpu: 150, edgeRss: 40 }));
    expect(faster.passed).toBe(true);
    expect(faster.figures.find((f) => f.key.endsWith('tunnel.achievedRps'))?.mark).toBe('better');
    expect(faster.figures.find((f) => f.key.endsWith('tunnel.edge.peakRssMb'))?.mark).toBe('better');
    const fatter = compare(ramp(steady), ramp({ ...steady, edgeRss: 120 }));
    expect(keys(fatter.regressions)).toEqual(['stages[rate 200 req/s 20 conn].tunnel.edge.peakRssMb']);
  });

  it('a p99 set by one stalled second is within the noise the seconds show', () => {
    // The base's seconds are alike; the head's p99 came from one second 20× its typical one.
    const stalled = { ...steady, p99: 50, secondsP99: [5, 5, 100, 5, 5] };
    const c = compare(ramp({ ...steady, rps: 2000 }), ramp({ ...stalled, rps: 2000 }));
    const p99 = c.figures.find((f) => f.key === 'stages[rate 200 req/s 20 conn].tunnel.correctedP99Ms');
    expect(p99).toMatchObject({ changePct: 900, beyondNoise: false, mark: '' });
    expect(p99?.noisePct).toBeCloseTo(1900, 5);
    expect(c.passed).toBe(true);
    // Steady seconds at the same p99: beyond the noise, a regression.
    const steadyWorse = { ...steady, rps: 2000, p99: 50, secondsP99: [50, 50, 50, 50, 50] };
    // Gated as the typical second's p99: the stage's own is shown beside it, never gated.
    const worse = compare(ramp({ ...steady, rps: 2000 }), ramp(steadyWorse));
    expect(keys(worse.regressions)).toContain('stages[rate 200 req/s 20 conn].tunnel.typicalSecondP99Ms');
    expect(
      worse.figures.find((f) => f.key === 'stages[rate 200 req/s 20 conn].tunnel.correctedP99Ms'),
    ).toMatchObject({ gatedBySeconds: true, mark: 'worse' });
  });

  it("a stage's derived figures (added p99, ratios) take the band of the sides they are made of", () => {
    // Two runs of one build on this machine: the tunnel's seconds' p99 spread 2 to 76 ms, and the added
    // p99 and the p99 ratio moved 30 to 500 %, each marked "changed" against the 5 % floor although the
    // p99s they are made of moved well inside their band.
    const base = ramp({ ...steady, p99: 40, secondsP99: [5, 40, 8, 30, 6] });
    const head = ramp({ ...steady, p99: 20, secondsP99: [20, 6, 5, 9, 7] });
    const c = compare(base, head);
    const stage = 'stages[rate 200 req/s 20 conn]';
    expect(c.figures.find((f) => f.key === `${stage}.tunnel.correctedP99Ms`)?.beyondNoise).toBe(false);
    for (const field of ['addedP99Ms', 'addedCorrectedP99Ms', 'p99Ratio']) {
      const f = c.figures.find((x) => x.key === `${stage}.comparison.${field}`);
      expect(f, field).toMatchObject({ beyondNoise: false, mark: '' });
    }
  });

  it('the rate seconds set the band of a stage figure that has no series (CPU)', () => {
    const wobbly = { ...steady, secondsRps: [100, 300, 150, 250, 200] };
    const c = compare(ramp(wobbly), ramp({ ...wobbly, edgeCpu: 390, agentCpu: 390 }));
    const cpu = c.figures.find((f) => f.key.endsWith('tunnel.tunnelCpuPerRequestUs'));
    expect(cpu?.noisePct).toBeCloseTo(50, 5);
    expect(cpu?.mark).toBe('');
  });

  it("CPU per request moves with the kit's own processes beside it: that much is the machine", () => {
    // Both runs of one build; in the head the backend and the load generator, same code, took 30 % more
    // CPU per request (a busier machine), and the tunnel 25 % more with them.
    const base = ramp(steady);
    const head = ramp({ ...steady, edgeCpu: 375, agentCpu: 375 }) as {
      stages: Array<{
        tunnel: { backend: { cpuPerRequestUs: number }; generator: { cpuPerRequestUs: number } };
      }>;
    };
    head.stages[0]!.tunnel.backend.cpuPerRequestUs = 130;
    head.stages[0]!.tunnel.generator.cpuPerRequestUs = 60;
    const c = compare(base, head as unknown as Record<string, unknown>);
    const tunnel = c.figures.find((f) => f.key.endsWith('tunnel.tunnelCpuPerRequestUs'));
    expect(tunnel).toMatchObject({ noisePct: 30, mark: '' });
    expect(tunnel?.changePct).toBeCloseTo(25, 5);
    expect(c.passed).toBe(true);
    // The direct side's controls did not move: its figures keep their own band.
    expect(c.figures.find((f) => f.key.endsWith('direct.backend.cpuPerRequestUs'))?.noisePct).toBe(5);
  });

  it('a p99 read from too few samples is shown but never gated', () => {
    const few = { ...steady, rps: 50 };
    const c = compare(ramp(few), ramp({ ...few, p99: 20 }));
    const p99 = c.figures.find((f) => f.key.endsWith('tunnel.correctedP99Ms'));
    expect(p99).toMatchObject({ lowSample: true, mark: 'worse' });
    expect(c.passed).toBe(true);
  });

  it('max: closed-loop stages by connection count; unknown fields (a verdict) are ignored', () => {
    const max = (tunnel: StagedFigures, extra?: Record<string, unknown>) =>
      stagedReport('max', [{ rate: null, connections: 50, direct, tunnel }], extra);
    const c = compare(max(steady), max({ ...steady, rps: 100 }, { verdict: { knee: 12 }, newField: 3 }));
    expect(keys(c.regressions)).toContain('stages[closed 50 conn].tunnel.achievedRps');
    expect(c.figures.some((f) => /verdict|newField/.test(f.key))).toBe(false);
    // A field only one report has is counted, not compared.
    expect(c.onlyInHead).toBe(1);
  });
});

describe('standalone scenarios', () => {
  it('bulk: transfers by direction and side; one-shot MB/s and agent RSS are shown, not gated', () => {
    const c = compare(
      standaloneReport('bulk', bulkResult(900, 70)),
      standaloneReport('bulk', bulkResult(500, 110)),
    );
    // One transfer each way: nothing shows how far the next run's would land (no noise estimate).
    const worse = c.figures.filter((f) => f.mark === 'worse');
    expect(keys(worse)).toEqual([
      'result.transfers[download tunnel].mbPerSec',
      'result.transfers[download tunnel].agent.peakMb',
      'result.transfers[upload tunnel].mbPerSec',
      'result.transfers[upload tunnel].agent.peakMb',
    ]);
    expect(worse.every((f) => f.noNoiseEstimate)).toBe(true);
    expect(c.regressions).toEqual([]);
    expect(renderCompareMarkdown(c)).toContain('(no noise estimate)');
  });

  it('tcp: rounds are repetitions: their median is compared and their spread is the noise', () => {
    const base = standaloneReport('tcp', tcpResult([5000, 5400, 4600], 60));
    const rps = reportFigures(base).get('result.closedLoop[tunnel 100 conn].rps');
    expect(rps?.value).toBe(5000);
    expect(rps?.noise).toBeCloseTo(0.16, 5);
    // 10 % fewer requests per second is inside the 16 % the rounds spread over.
    const c = compare(base, standaloneReport('tcp', tcpResult([4500, 4500, 4500], 60)));
    expect(c.figures.find((f) => f.key === 'result.closedLoop[tunnel 100 conn].rps')?.beyondNoise).toBe(
      false,
    );
    const cpu = compare(base, standaloneReport('tcp', tcpResult([5000, 5000, 5000], 90)));
    expect(keys(cpu.regressions)).toContain('result.closedLoop[tunnel 100 conn].tunnelCpuPerRequestUs');
  });

  it('h2, grpc, tls: rows by label, side and load', () => {
    for (const scenario of ['h2', 'grpc', 'tls']) {
      const c = compare(
        standaloneReport(scenario, sideBySideResult(200, 1000)),
        standaloneReport(scenario, sideBySideResult(300, 1000)),
      );
      expect(keys(c.regressions)).toEqual([
        'result.rows[h2 tunnel rate 1000 req/s 10 conn].cpuPerRequestUs.edge',
        'result.rows[h2 tunnel rate 1000 req/s 10 conn].cpuPerRequestUs.agent',
        'result.rows[h2 tunnel rate 1000 req/s 10 conn].betweenCpuPerRequestUs',
      ]);
    }
  });

  it('cluster: latency stages by route; the cross-node p99 and CPU of all nodes', () => {
    const c = compare(
      standaloneReport('cluster', clusterResult(3.3, 452)),
      standaloneReport('cluster', clusterResult(6, 700)),
    );
    expect(keys(c.regressions)).toEqual([
      'result.latency[cross-node 500 req/s].p99Ms',
      'result.latency[cross-node 500 req/s].cpuPerRequestUs.ingress',
      'result.latency[cross-node 500 req/s].cpuPerRequestUs.holder',
      'result.latency[cross-node 500 req/s].cpuPerRequestUs.nodes',
    ]);
    expect(c.figures.find((f) => f.key === 'result.faults[kill 200 req/s].recoveredAfterMs')?.base).toBe(313);
  });

  it('wan: the tunnel download rate', () => {
    const c = compare(standaloneReport('wan', wanResult(100)), standaloneReport('wan', wanResult(60)));
    expect(keys(c.regressions)).toEqual(['result.download.tunnelMBps', 'result.download.tunnel.mbPerSec']);
  });

  it('sessions: the edge RSS; the memory per session is compared, not gated', () => {
    const c = compare(
      standaloneReport('sessions', sessionsResult(6, 120)),
      standaloneReport('sessions', sessionsResult(9, 180)),
    );
    expect(keys(c.regressions)).toEqual(['result.sessions.edgeRssAfterMb', 'result.sessions.edgePeakRssMb']);
    expect(c.figures.find((f) => f.key === 'result.sessions.edgeKbPerSession')?.mark).toBe('changed');
  });

  it('floor: the tunnel stage among the relays', () => {
    const c = compare(
      standaloneReport('floor', floorResult(300)),
      standaloneReport('floor', floorResult(450)),
    );
    expect(keys(c.regressions)).toEqual([
      'result.stages[tunnel rate 1000 req/s 100 conn].edgeCpuPerRequestUs',
      'result.stages[tunnel rate 1000 req/s 100 conn].agentCpuPerRequestUs',
      'result.stages[tunnel rate 1000 req/s 100 conn].betweenCpuPerRequestUs',
    ]);
  });
});

describe('a summary restates its stages', () => {
  // floor's and tcp's `summary` repeats figures of their stages (tcp: the rounds' median) without the
  // stages' seconds or rounds, so under its key the noise band is the 5 % floor: two runs of one build
  // moved floor's closed-loop tunnel CPU per request 43 % on this machine, inside its stage's band, and
  // the summary's copy of it was called a regression.
  const noisy = (report: Record<string, unknown>): Record<string, unknown> => {
    const result = report.result as { stages: Array<{ side: string; perSecond: unknown[] }> };
    const rates = [600, 1000, 1400, 1000, 700, 1300];
    for (const stage of result.stages) {
      stage.perSecond = rates.map((achievedRps, second) => ({
        second,
        durationSec: 1,
        achievedRps,
        p50Ms: 0.5,
        p99Ms: 3,
      }));
    }
    return report;
  };

  it('floor: a CPU per request change inside its stage band is no regression under the summary either', () => {
    const c = compare(
      noisy(standaloneReport('floor', floorResult(300))),
      noisy(standaloneReport('floor', floorResult(390))),
    );
    const stage = c.figures.find(
      (f) => f.key === 'result.stages[tunnel rate 1000 req/s 100 conn].betweenCpuPerRequestUs',
    );
    expect(stage).toMatchObject({ beyondNoise: false });
    expect(c.regressions).toEqual([]);
    expect(c.figures.some((f) => f.key.startsWith('result.summary.'))).toBe(false);
  });

  it('tcp: the rounds spread over 16 %: 10 % fewer requests per second is not a change, summary or not', () => {
    const c = compare(
      standaloneReport('tcp', tcpResult([5000, 5400, 4600], 60)),
      standaloneReport('tcp', tcpResult([4500, 4500, 4500], 60)),
    );
    expect(c.figures.filter((f) => f.beyondNoise && f.kind !== 'other')).toEqual([]);
  });
});

describe('reports that share no gated figure', () => {
  it('other stages (a workflow whose --stages changed): "nothing compared", not "no regression"', () => {
    const at = (rate: number) =>
      stagedReport('ramp', [{ rate, connections: 20, direct, tunnel: { ...steady, edgeCpu: rate } }], {
        totals: { direct: { successPct: 100 }, tunnel: { successPct: 100 } },
      });
    const c = compare(at(200), at(400));
    expect(c.figures.map((f) => f.key)).toEqual(['totals.direct.successPct', 'totals.tunnel.successPct']);
    expect(c.passed).toBe(true);
    const md = renderCompareMarkdown(c);
    expect(md).not.toContain('No regression');
    expect(md).toContain(
      '**Nothing compared: the reports share no p99, throughput, CPU per request or RSS figure',
    );
  });
});

describe('runs made alike', () => {
  it('names what differs between the runs: the machine (a hosted runner of another CPU), the settings', () => {
    const base = ramp(steady, { environment: { node: 'v24.1.0', cpus: 4, cpuModel: 'AMD EPYC 7763' } });
    const head = ramp(steady, {
      environment: { node: 'v24.1.0', cpus: 4, cpuModel: 'Intel Xeon 8370C' },
      settings: { path: '/health', sides: ['direct', 'tunnel'], backendUrl: 'http://127.0.0.1:2' },
    });
    const c = compare(base, head);
    expect(c.differences).toEqual([
      'environment.cpuModel: AMD EPYC 7763 → Intel Xeon 8370C',
      'settings.path: /loadtest/get → /health',
    ]);
    expect(renderCompareMarkdown(c)).toContain(
      'Not alike: environment.cpuModel: AMD EPYC 7763 → Intel Xeon 8370C; settings.path: /loadtest/get → /health',
    );
    expect(compare(ramp(steady), ramp(steady)).differences).toEqual([]);
  });
});

describe('reading reports', () => {
  const write = (name: string, body: string): string => {
    const dir = join(work, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'report.json'), body);
    return dir;
  };
  const reason = (fn: () => unknown): string | undefined => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ReportInputError && err.code === BenchErrorCode.REPORT_INPUT) return err.reason;
      throw err;
    }
    return undefined;
  };

  it('a run directory or its report.json', () => {
    const dir = write('ok', JSON.stringify(ramp(steady)));
    expect(loadReport(dir).scenario).toBe('ramp');
    expect(loadReport('report.json', dir).file).toBe(join(dir, 'report.json'));
  });

  it('typed errors: missing, a directory without a report, not JSON, not a report, a schema version it does not read, two scenarios', () => {
    expect(reason(() => loadReport(join(work, 'nowhere')))).toBe('missing');
    mkdirSync(join(work, 'empty'));
    expect(reason(() => loadReport(join(work, 'empty')))).toBe('missing');
    expect(reason(() => loadReport(write('garbled', '{"schemaVersion": 1,')))).toBe('unreadable');
    expect(reason(() => loadReport(write('other', '{"hello": 1}')))).toBe('not-a-report');
    const v2 = write('v2', JSON.stringify({ ...ramp(steady), schemaVersion: 2 }));
    expect(reason(() => loadReport(v2))).toBe('schema-version');
    const max = write('max', JSON.stringify({ ...ramp(steady), scenario: 'max' }));
    expect(reason(() => loadPair(write('ramp', JSON.stringify(ramp(steady))), max))).toBe('scenario');
  });
});

describe('the reports it writes', () => {
  it('Markdown and HTML: the verdict, the regressions, every figure, the rule', () => {
    const c = compare(ramp(steady), ramp({ ...steady, edgeCpu: 450 }));
    const md = renderCompareMarkdown(c);
    expect(md).toContain('# tunnel2 bench compare: ramp');
    expect(md).toContain('**Regression: 2 figures worse by more than --max-regress 20 % beyond the noise');
    expect(md).toMatch(
      /\| stages\[rate 200 req\/s 20 conn\]\.tunnel\.edge\.cpuPerRequestUs \| 300 \| 450 \| \+50\.0 % \| ±5 % \| ✗ regression \|/,
    );
    expect(md).toContain('## Every figure');
    expect(md).toContain('A change is marked when it is beyond the noise');
    const html = renderCompareHtml(c);
    expect(html).toContain('<p class="failed"><strong>Regression: 2 figures');
    expect(html).not.toMatch(/<script|https?:\/\//);
  });

  it("a report's names are data: an HTML comment or a line break in one cannot hide or break the PR comment", () => {
    const hostile = (cpu: number) => {
      const result = sideBySideResult(cpu, 1000);
      result.rows[1]!.label = 'h2 <!-- tunnel\n| x |';
      return standaloneReport('h2', result);
    };
    const md = renderCompareMarkdown(compare(hostile(200), hostile(300)));
    expect(md).not.toContain('<!--');
    // Every row of the hostile stack is whole: its name, base, head, change, noise and mark on one line.
    const rows = md.split('\n').filter((line) => line.startsWith('| result.rows[h2 &lt;!-- tunnel'));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row.split(/(?<!\\)\|/)).toHaveLength(8);
  });
});

describe('pnpm bench compare (the built entry)', () => {
  const dir = (name: string, json: Record<string, unknown>): string => {
    const d = join(work, 'cli', name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'report.json'), JSON.stringify(json));
    return d;
  };

  it('exit 0 and Markdown on stdout when nothing regressed; --out writes compare.md, .html, .json', async () => {
    const out = join(work, 'cli', 'out');
    const run = await runBench(['compare', dir('a', ramp(steady)), dir('b', ramp(steady)), '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('**No regression');
    expect(run.stderr).toContain('No regression');
    expect(readFileSync(join(out, 'compare.md'), 'utf8')).toBe(run.stdout);
    expect(existsSync(join(out, 'compare.html'))).toBe(true);
    expect(JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8'))).toMatchObject({ passed: true });
  });

  it('exit 1 on a regression, naming the figures on stderr', async () => {
    const run = await runBench([
      'compare',
      dir('c', ramp(steady)),
      dir('d', ramp({ ...steady, agentCpu: 400 })),
      '--max-regress',
      '20',
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('stages[rate 200 req/s 20 conn].tunnel.agent.cpuPerRequestUs +33.3 %');
  });

  it('exit 2 with one line for a bad flag, a missing report or two scenarios', async () => {
    const bad = await runBench([
      'compare',
      dir('e', ramp(steady)),
      dir('f', ramp(steady)),
      '--max-regress',
      'x',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('bench: --max-regress x: expected a percentage');
    const missing = await runBench(['compare', join(work, 'cli', 'nope'), dir('g', ramp(steady))]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe(`bench: ${join(work, 'cli', 'nope')}: no such file or directory\n`);
    const mixed = await runBench([
      'compare',
      dir('h', ramp(steady)),
      dir('i', standaloneReport('bulk', bulkResult(1, 1))),
    ]);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/different scenarios: .* is ramp, .* is bulk/);
  });

  it('a report nested past any real one (hostile input): exit 2 with one line, not a stack overflow (exit 1)', async () => {
    const depth = 50_000;
    const d = join(work, 'cli', 'deep');
    mkdirSync(d, { recursive: true });
    writeFileSync(
      join(d, 'report.json'),
      `{"schemaVersion":1,"scenario":"ramp","x":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`,
    );
    const run = await runBench(['compare', d, d]);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(
      /^bench: .*report\.json: not a bench report \(nested deeper than 64 levels\)\n$/,
    );
  });

  it('an --out it cannot write: exit 2 with one line, not 1 (the bench action reads 1 as a regression)', async () => {
    const [base, head] = [dir('j', ramp(steady)), dir('k', ramp(steady))];
    const file = join(base, 'a-file');
    writeFileSync(file, '');
    const run = await runBench(['compare', base, head, '--out', join(file, 'sub')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^bench: --out .*a-file\/sub: cannot write the comparison \(ENOTDIR/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('the p99 to gate on: the typical second (issue #35 item 2 follow-up)', () => {
  const TYPICAL = 'stages[rate 200 req/s 20 conn].tunnel.typicalSecondP99Ms';
  const STAGE = 'stages[rate 200 req/s 20 conn].tunnel.correctedP99Ms';
  // Seconds as a noisy machine gives them: one stalled second sets the stage's p99, the others vary.
  const base = { ...steady, rps: 2000, p99: 60, secondsP99: [5, 6, 5.5, 60, 6, 5, 5.5, 6] };

  it('every second 50 % slower: the typical second p99 is a regression, though the stage p99 is in its band', () => {
    const head = { ...base, p99: 70, secondsP99: [8, 9, 8.5, 70, 8.8, 7.6, 8.3, 9] };
    const c = compare(ramp(base), ramp(head));
    expect(c.figures.find((f) => f.key === STAGE)).toMatchObject({ beyondNoise: false });
    const typical = c.figures.find((f) => f.key === TYPICAL);
    expect(typical).toMatchObject({ kind: 'p99', mark: 'regression' });
    expect(typical?.changePct).toBeGreaterThan(40);
    expect(keys(c.regressions)).toEqual([TYPICAL]);
  });

  it('the stall lands in another second, the others as alike: no regression', () => {
    const head = { ...base, p99: 80, secondsP99: [6, 5, 80, 5.5, 6, 5.5, 5, 6] };
    const c = compare(ramp(base), ramp(head));
    expect(c.regressions).toEqual([]);
    expect(c.figures.find((f) => f.key === TYPICAL)?.beyondNoise).toBe(false);
  });
  it("the load generator's own loop held as long: the machine, not a p99 regression", () => {
    const every = { ...base, p99: 70, secondsP99: [20, 22, 21, 70, 20, 19, 21, 22] };
    const held = (delayMs: number) => {
      const report = ramp(every);
      for (const stage of report.stages as Array<{ tunnel: { generator: Record<string, unknown> } }>) {
        stage.tunnel.generator.eventLoopDelayP99Ms = delayMs;
      }
      return report;
    };
    // The generator's loop delay p99 2 → 30 ms (+1,400 %): the typical second's +270 % is inside that.
    const c = compare(ramp(base), held(30));
    expect(c.figures.find((f) => f.key === TYPICAL)).toMatchObject({ mark: '' });
    expect(c.regressions).toEqual([]);
    // The same p99s with the generator's loop as before: the tunnel's doing.
    expect(keys(compare(ramp(base), held(2)).regressions)).toEqual([TYPICAL]);
  });
});

describe('a busy machine is not the change (issue #35 item 2 follow-up)', () => {
  type Stage = { side: string; mode: string; rps: number; edgeCpuPerRequestUs: number | null };
  const floorWith = (edit: (stages: Stage[]) => void) => {
    const report = standaloneReport('floor', floorResult(300));
    edit((report.result as { stages: Stage[] }).stages);
    return report;
  };
  const scale = (stages: Stage[], side: string, field: 'rps' | 'edgeCpuPerRequestUs', by: number) => {
    for (const s of stages) {
      const value = s[field];
      if (s.side === side && value !== null) s[field] = value * by;
    }
  };

  it('floor: the relay rate −21 % with the direct side −20 %: the machine, no regression', () => {
    const c = compare(
      floorWith(() => {}),
      floorWith((s) => {
        scale(s, 'direct', 'rps', 0.8);
        scale(s, 'relay', 'rps', 0.793);
      }),
    );
    expect(c.regressions).toEqual([]);
    const relay = c.figures.find((f) => f.key === 'result.stages[relay rate 1000 req/s 100 conn].rps');
    expect(relay).toMatchObject({ floor: true, mark: 'worse' });
  });

  it('floor: the tunnel rate moved as much as its floors: no regression; alone: a regression', () => {
    const tunnelRps = 'result.stages[tunnel rate 1000 req/s 100 conn].rps';
    const withFloors = compare(
      floorWith(() => {}),
      floorWith((s) => {
        scale(s, 'relay', 'rps', 0.7);
        scale(s, 'tunnel', 'rps', 0.72);
      }),
    );
    expect(withFloors.regressions).toEqual([]);
    expect(withFloors.figures.find((f) => f.key === tunnelRps)?.noisePct).toBeCloseTo(30, 5);
    const alone = compare(
      floorWith(() => {}),
      floorWith((s) => scale(s, 'tunnel', 'rps', 0.72)),
    );
    expect(keys(alone.regressions)).toEqual([tunnelRps]);
  });

  it('floor: the tunnel edge CPU +63 % with the relay edge CPU +60 %: the machine', () => {
    const c = compare(
      floorWith(() => {}),
      floorWith((s) => {
        scale(s, 'relay', 'edgeCpuPerRequestUs', 1.6);
        scale(s, 'tunnel', 'edgeCpuPerRequestUs', 1.63);
      }),
    );
    expect(keys(c.regressions)).toEqual([]);
  });

  it('tcp: the direct side moved: its own figures are the floor, never a regression', () => {
    const slowDirect = standaloneReport('tcp', tcpResult([5000], 60));
    const result = slowDirect.result as { closedLoop: Array<{ side: string; rps: number }> };
    for (const s of result.closedLoop) if (s.side === 'direct') s.rps *= 0.38;
    const c = compare(standaloneReport('tcp', tcpResult([5000], 60)), slowDirect);
    expect(c.regressions).toEqual([]);
    expect(c.figures.find((f) => f.key === 'result.closedLoop[direct 100 conn].rps')?.mark).toBe('worse');
  });

  it('tcp: the direct side +120 % while the tunnel −33 %: the machine moved that much, no regression', () => {
    const moved = standaloneReport('tcp', tcpResult([5000], 60));
    const result = moved.result as { closedLoop: Array<{ side: string; rps: number }> };
    for (const s of result.closedLoop) s.rps *= s.side === 'direct' ? 2.2 : 0.67;
    const c = compare(standaloneReport('tcp', tcpResult([5000], 60)), moved);
    expect(c.regressions).toEqual([]);
    expect(c.figures.find((f) => f.key === 'result.closedLoop[tunnel 100 conn].rps')?.noisePct).toBeCloseTo(
      120,
      5,
    );
  });

  it('with --target the direct side is the user service: its move is the change, still gated', () => {
    const target = { settings: { path: '/', sides: ['direct', 'tunnel'], targetUrl: 'http://127.0.0.1:1/' } };
    const slower = { ...direct, p99: 4, secondsP99: [4, 4, 4, 4, 4] };
    const c = compare(
      stagedReport('ramp', [{ rate: 200, connections: 20, direct, tunnel: steady }], target),
      stagedReport(
        'ramp',
        [{ rate: 200, connections: 20, direct: slower, tunnel: { ...steady, p99: 10 } }],
        target,
      ),
    );
    expect(keys(c.regressions)).toContain('stages[rate 200 req/s 20 conn].tunnel.typicalSecondP99Ms');
    expect(keys(c.regressions)).toContain('stages[rate 200 req/s 20 conn].direct.typicalSecondP99Ms');
  });

  it("warns when one run's machine was busier (the load average in each side's machine field)", () => {
    const loaded = (load: number) => {
      const report = ramp(steady);
      for (const stage of report.stages as Array<{ tunnel: Record<string, unknown> }>) {
        stage.tunnel.machine = { loadAverageBefore: load, loadAverageAfter: load, busyCpuPct: 150 };
      }
      return report;
    };
    const c = compare(loaded(1.2), loaded(6.5));
    expect(c.warnings).toEqual([expect.stringContaining('busier in head than in base')]);
    expect(renderCompareMarkdown(c)).toContain('⚠ The machine was busier in head than in base');
    expect(c.figures.some((f) => f.key.includes('machine'))).toBe(false);
    expect(compare(loaded(1.2), loaded(1.6)).warnings).toEqual([]);
  });
});

describe('errors (issue #35 item 2 follow-up)', () => {
  const withSuccess = (pct: number) =>
    ramp(steady, { totals: { direct: null, tunnel: { successPct: pct } } });

  it('a success rate 2 points lower is a regression at the default --max-error-rise 1, not at 5', () => {
    const c = compare(withSuccess(100), withSuccess(98));
    expect(keys(c.regressions)).toEqual(['totals.tunnel.successPct']);
    expect(compareReports(loaded(withSuccess(100)), loaded(withSuccess(98)), 20, 5).passed).toBe(true);
    expect(compare(withSuccess(100), withSuccess(99.5)).passed).toBe(true);
  });

  it('floor and tcp count requests and answers: their success rate is compared alike', () => {
    const failing = standaloneReport('floor', floorResult(300));
    const stages = (failing.result as { stages: Array<{ side: string; ok: number }> }).stages;
    for (const s of stages) if (s.side === 'tunnel') s.ok = 9500;
    const c = compare(standaloneReport('floor', floorResult(300)), failing);
    expect(keys(c.regressions)).toEqual(['result.stages[tunnel rate 1000 req/s 100 conn].successPct']);
  });

  it('--max-error-rise on the command line: a bad value is exit 2, a looser one passes', async () => {
    const dir = join(work, 'errors');
    mkdirSync(dir, { recursive: true });
    const basePath = join(dir, 'base.json');
    const headPath = join(dir, 'head.json');
    writeFileSync(basePath, JSON.stringify(withSuccess(100)));
    writeFileSync(headPath, JSON.stringify(withSuccess(97)));
    const failed = await runBench(['compare', basePath, headPath]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('totals.tunnel.successPct');
    expect((await runBench(['compare', basePath, headPath, '--max-error-rise', '5'])).code).toBe(0);
    const bad = await runBench(['compare', basePath, headPath, '--max-error-rise', 'lots']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--max-error-rise lots');
  });
});
