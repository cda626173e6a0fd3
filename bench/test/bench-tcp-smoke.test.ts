import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TcpGate } from '../src/reports/tcp-report.js';
import type { TcpResult } from '../src/scenarios/tcp-scenario.js';
import { runBench } from './support/run-bench.js';

// `pnpm bench tcp` end to end as the built bench runs it: a real backend, edge (--tcp-ports) and
// `tunnel2 tcp` agent, and the floor relay pair beside them; tiny durations and sizes.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-tcp-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface TcpReport {
  schemaVersion: number;
  scenario: string;
  command: string;
  result: TcpResult;
  gate: TcpGate;
}

const read = (out: string, file: string): string => readFileSync(join(out, file), 'utf8');

describe('pnpm bench tcp (smoke)', () => {
  it('measures the closed loop and the transfers through a TCP tunnel beside direct and the floor, and writes three reports', async () => {
    const out = join(work, 'tcp');
    const run = await runBench(
      'tcp --connections 8 --duration 1 --warmup 1 --size 8 --warmup-mib 2 --rounds 2 --out'
        .split(' ')
        .concat(out),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(out);
    const json = JSON.parse(read(out, 'report.json')) as TcpReport;
    expect(json.schemaVersion).toBe(1);
    expect(json.scenario).toBe('tcp');
    expect(json.result.stack.tcpUrl).toMatch(/^tcp:\/\/[^:]+:\d+$/);
    expect(json.result.stack.floorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(json.result.settings).toMatchObject({ floor: true, floorFlags: [] });
    // Direct, the floor and the tunnel alternate, round by round.
    expect(json.result.closedLoop.map((s) => [s.side, s.round])).toEqual([
      ['direct', 1],
      ['floor', 1],
      ['tunnel', 1],
      ['direct', 2],
      ['floor', 2],
      ['tunnel', 2],
    ]);
    for (const stage of json.result.closedLoop) {
      expect(stage.errors).toBe(0);
      expect(stage.ok).toBe(stage.requests);
      expect(stage.ok).toBeGreaterThan(0);
      if (stage.side !== 'direct') {
        expect(stage.tunnelCpuPerRequestUs).toBe(stage.edgeCpuPerRequestUs! + stage.agentCpuPerRequestUs!);
      } else expect(stage.tunnelCpuPerRequestUs).toBeNull();
      expect(stage.clientCpuPct).toBeGreaterThan(0);
    }
    expect(json.result.transfers.map((t) => [t.direction, t.side, t.bytes, t.error])).toEqual([
      ['download', 'direct', 8 * 2 ** 20, null],
      ['download', 'floor', 8 * 2 ** 20, null],
      ['download', 'tunnel', 8 * 2 ** 20, null],
      ['upload', 'direct', 8 * 2 ** 20, null],
      ['upload', 'floor', 8 * 2 ** 20, null],
      ['upload', 'tunnel', 8 * 2 ** 20, null],
    ]);
    for (const t of json.result.transfers.filter((x) => x.side !== 'direct')) {
      expect(t.edge!.peakMb).toBeGreaterThanOrEqual(t.edge!.startMb);
      expect(t.agent!.peakMb).toBeGreaterThanOrEqual(t.agent!.startMb);
    }
    const { summary } = json.result;
    expect(summary.tunnelOverDirectRps).toBeGreaterThan(0);
    expect(summary.downloadMbps.tunnel).toBeGreaterThan(0);
    expect(summary.uploadMbps.tunnel).toBeGreaterThan(0);
    expect(summary.floorRps).toBeGreaterThan(0);
    expect(summary.floorCpuPerRequestUs).toBeGreaterThanOrEqual(0);
    expect(summary.downloadMbps.floor).toBeGreaterThan(0);
    expect(summary.uploadMbps.floor).toBeGreaterThan(0);
    const { rps, download, upload } = summary.ratios!;
    expect(rps.floorOverDirect).toBe(summary.floorRps! / summary.directRps!);
    expect(rps.tunnelOverFloor).toBe(summary.tunnelRps! / summary.floorRps!);
    expect(download.tunnelOverFloor).toBe(summary.downloadMbps.tunnel! / summary.downloadMbps.floor!);
    expect(upload.floorOverDirect).toBe(summary.uploadMbps.floor! / summary.uploadMbps.direct!);
    expect(json.gate).toMatchObject({ passed: true, violations: [] });
    const md = read(out, 'report.md');
    expect(md).toContain('## Targets (issue #16)');
    expect(md).toContain('| closed loop at 8 connections ≥ 0.5 × direct |');
    // The flat-RSS target gives a verdict against its stated tolerance.
    expect(md).toMatch(
      /\| flat RSS \(edge and agent\): at most \+32 MB over a transfer \| at most \+[\d.]+ MB over a transfer \| (met|missed) \|/,
    );
    expect(md).toContain('## The floor');
    expect(md).toMatch(/\| download: edge \+ agent CPU per GiB \| – \| [\d.]+ s \| [\d.]+ s \|/);
    expect(md).toMatch(/\| closed loop RPS \(median\) \|( [\d,.]+ \|){3}( [\d.]+× \|){3}/);
    expect(read(out, 'report.html')).toContain('<h2>Transfers</h2>');
    expect(read(out, 'report.html')).toContain('<h2>The floor</h2>');
    expect(run.stderr).toContain('[tcp] tunnel round 2: ');
    expect(run.stderr).toContain('[tcp] floor round 2: ');
    expect(run.stderr).toContain('[tcp] download tunnel: 8 MiB');
    expect(run.stderr).toContain('[tcp] upload floor: 8 MiB');
    expect(run.stderr).toMatch(/RPS floor \/ direct [\d.]+, tunnel \/ floor [\d.]+/);
  });

  it('gates: targets no tunnel can meet exit 1 and name each miss (and --no-floor leaves the floor out)', async () => {
    const out = join(work, 'tcp-gate');
    const run = await runBench(
      'tcp --no-floor --connections 4 --duration 1 --warmup 0 --size 2 --min-ratio 1000 --max-cpu-us 0.001 --min-mbps 1000000 --out'
        .split(' ')
        .concat(out),
    );
    expect(run.code, run.stderr).toBe(1);
    const json = JSON.parse(read(out, 'report.json')) as TcpReport;
    expect(json.gate.passed).toBe(false);
    // Without --warmup-mib the warm-up is no larger than the transfer (128 MiB before a 2 MiB one, before).
    expect(json.result.settings.warmupBytes).toBe(2 * 2 ** 20);
    const violations = json.gate.violations.join('\n');
    expect(violations).toMatch(/closed loop tunnel \/ direct [\d.]+ < 1000/);
    expect(violations).toMatch(/tunnel CPU [\d–]+ µs per request > 0.001/);
    expect(violations).toMatch(/download tunnel: \d+ MB\/s < 1000000/);
    expect(violations).toMatch(/upload tunnel: \d+ MB\/s < 1000000/);
    expect(read(out, 'report.md')).toContain('Gate: **failed**');
    expect(json.result.settings.floor).toBe(false);
    expect(json.result.closedLoop.map((s) => s.side)).toEqual(['direct', 'tunnel']);
    expect(json.result.transfers.map((t) => t.side)).toEqual(['direct', 'tunnel', 'direct', 'tunnel']);
    expect(json.result.stack.floorUrl).toBeUndefined();
    expect(read(out, 'report.md')).not.toContain('## The floor');
  });

  it('refuses a bad flag before anything starts (exit 2)', async () => {
    const run = await runBench(['tcp', '--connections', '0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--connections 0');
    const unknown = await runBench(['tcp', '--rate', '5']);
    expect(unknown.code).toBe(2);
    const lever = await runBench(['tcp', '--floor-flags=--coalesce lots']);
    expect(lever.code).toBe(2);
    expect(lever.stderr).toContain('--floor-flags --coalesce lots');
  });
});
