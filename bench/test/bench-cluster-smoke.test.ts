import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { StandaloneReport } from '../src/reports/standalone-report-md.js';
import type { ClusterResult } from '../src/scenarios/cluster-scenario.js';
import { runBench } from './support/run-bench.js';

// `pnpm bench cluster` end to end (real redis-server, three `tunnel2 server`, HAProxy), at short durations.
// The fault phases count failures honestly and may fail the gate on today's code: the test checks that the
// run completes and reports every phase, not that the targets are met.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-cluster-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('cluster bench scenario (smoke)', () => {
  it('measures same- and cross-node, a rolling restart and a kill -9, and writes both reports', async () => {
    const out = join(work, 'cluster');
    const run = await runBench([
      'cluster',
      '--rates',
      '50',
      '--duration',
      '2',
      '--warmup',
      '0',
      '--fault-rate',
      '20',
      '--settle',
      '1',
      '--out',
      out,
    ]);
    // 0 when every target is met, 1 when the gate names one: both are a completed run.
    expect([0, 1], run.stderr).toContain(run.code);
    expect(run.stdout.trim()).toBe(out);
    const json = JSON.parse(
      readFileSync(join(out, 'report.json'), 'utf8'),
    ) as StandaloneReport<ClusterResult>;
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(json.result.latency.map((s) => [s.route, s.targetRps])).toEqual([
      ['same-node', 50],
      ['cross-node', 50],
    ]);
    for (const stage of json.result.latency) {
      expect(stage.ok).toBe(stage.requests);
      expect(stage.ok).toBeGreaterThan(0);
      expect(stage.p50Ms).toBeGreaterThan(0);
      expect(stage.cpuPerRequestUs.agent).not.toBeNull();
      expect(stage.cpuPerRequestUs.nodes).not.toBeNull();
    }
    const [restart, kill] = json.result.faults;
    expect(restart?.kind).toBe('rolling-restart');
    expect(restart?.events.filter((e) => e.includes('SIGTERM'))).toHaveLength(3);
    expect(kill?.kind).toBe('kill');
    expect(kill?.events[0]).toMatch(/kill -9 node-\d/);
    for (const phase of json.result.faults) {
      expect(phase.requests).toBeGreaterThan(0);
      expect(phase.ok + phase.failed).toBe(phase.requests);
    }
    expect(json.gate.passed).toBe(run.code === 0);
    expect(md).toContain(
      '| route | target (req/s) | ok | rate (req/s) | p50 (ms) | p99 (ms) | worst second p99 (ms) | lowest second (req/s) | nodes CPU (µs/req) |',
    );
    expect(md).toContain('| phase | target (req/s) | ok | failed | failures by kind | p99 (ms) |');
    for (const phase of [...json.result.latency, ...json.result.faults]) {
      expect(phase.perSecond.reduce((sum, p) => sum + p.requests, 0)).toBe(phase.requests);
    }
  }, 120_000);

  it('refuses a flag of another scenario with exit 2', async () => {
    const run = await runBench(['cluster', '--size', '4']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--size does not apply to the cluster scenario');
  });
});
