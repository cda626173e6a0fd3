import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SideBySideResult, SideBySideRow } from '../src/measure/side-by-side-rows.js';
import { runtime } from '../src/runtime-paths.js';
import { runBench } from './support/run-bench.js';

// `pnpm bench h2`, `grpc` and `tls` end to end as the built bench runs them: a real test backend, h2c
// backend, grpc-js server and clients, edges (plain, TLS), agents (HTTP/1.1, --h2c), h2load and HAProxy;
// one-second rows. The figures must be there; their values are the machine's.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-h2-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Report {
  schemaVersion: number;
  scenario: string;
  command: string;
  result: SideBySideResult<unknown>;
  gate: { passed: boolean; violations: string[] };
}

function read(out: string): { json: Report; md: string; html: string } {
  return {
    json: JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as Report,
    md: readFileSync(join(out, 'report.md'), 'utf8'),
    html: readFileSync(join(out, 'report.html'), 'utf8'),
  };
}

/** A measured row: answers, no failures, a rate, and the CPU of the processes it names. */
function expectMeasured(row: SideBySideRow | undefined, processes: string[]): void {
  expect(row, 'row missing').toBeDefined();
  expect(row!.unavailable, row!.label).toBeNull();
  expect(row!.ok, row!.label).toBeGreaterThan(0);
  expect(row!.requests).toBe(row!.ok);
  expect(row!.errors).toEqual({});
  expect(row!.rps).toBeGreaterThan(0);
  if (row!.mode === 'rate') expect(row!.missedSlots, row!.label).toBeTypeOf('number');
  expect(Object.keys(row!.cpuPerRequestUs).sort()).toEqual([...processes].sort());
  for (const name of processes)
    expect(typeof row!.cpuPerRequestUs[name], `${row!.label} ${name}`).toBe('number');
}

/**
 * One-second rows read CPU in 10 ms clock ticks: a ratio target may be missed by noise (exit 1), never a
 * request may fail, which would be exit 1 too.
 */
function expectRan(run: { code: number | null; stderr: string }, out: string): Report {
  expect([0, 1], run.stderr).toContain(run.code);
  const { json } = read(out);
  expect(json.gate.violations.filter((v) => !/target/.test(v))).toEqual([]);
  expect(json.gate.passed).toBe(run.code === 0);
  return json;
}

/**
 * Whether this tree's edge serves TLS itself (`tunnel2 server --tls-cert`, issue #32's edge-tls part): the
 * bench must then measure it, and otherwise say so in the row instead of a number.
 */
const edgeServesTls = spawnSync(process.execPath, [runtime.cliBin(), 'server', '--help'], {
  encoding: 'utf8',
}).stdout.includes('--tls-cert');

const rowOf = (json: Report, label: string, mode: SideBySideRow['mode']) =>
  json.result.rows.find((r) => r.label === label && r.mode === mode);

describe('pnpm bench h2, grpc, tls (smoke)', () => {
  it('h2: HTTP/1.1 and h2 direct and through the tunnel, at a fixed rate and in an h2load closed loop', async () => {
    const out = join(work, 'h2');
    const run = await runBench(
      'h2 --rates 50 --duration 1 --warmup 0 --connections 2 --streams 2 --out'.split(' ').concat(out),
    );
    expectRan(run, out);
    expect(run.stdout.trim()).toBe(out);
    const { json, md, html } = read(out);
    expect(json).toMatchObject({ schemaVersion: 1, scenario: 'h2' });
    expect(json.result.rows.map((r) => [r.label, r.mode, r.generator])).toEqual([
      ['http/1.1 direct', 'rate', 'autocannon'],
      ['http/1.1 tunnel', 'rate', 'autocannon'],
      ['h2 direct', 'rate', 'node:http2'],
      ['h2 tunnel', 'rate', 'node:http2'],
      ['http/1.1 direct', 'closed', 'autocannon'],
      ['http/1.1 tunnel', 'closed', 'autocannon'],
      ['h2 direct', 'closed', 'h2load'],
      ['h2 tunnel', 'closed', 'h2load'],
    ]);
    for (const mode of ['rate', 'closed'] as const) {
      expectMeasured(rowOf(json, 'http/1.1 direct', mode), ['backend']);
      expectMeasured(rowOf(json, 'http/1.1 tunnel', mode), ['edge', 'agent', 'backend']);
      expectMeasured(rowOf(json, 'h2 direct', mode), ['backend']);
      expectMeasured(rowOf(json, 'h2 tunnel', mode), ['edge', 'agent', 'backend']);
    }
    const tunnel = rowOf(json, 'h2 tunnel', 'rate')!;
    expect(tunnel.betweenCpuPerRequestUs).toBeCloseTo(
      tunnel.cpuPerRequestUs.edge! + tunnel.cpuPerRequestUs.agent!,
      1,
    );
    expect(rowOf(json, 'h2 tunnel', 'closed')!.latencyMs.mean).toBeGreaterThan(0);
    expect(json.result.targets.map((t) => t.name)).toEqual([
      'failed requests, all rows',
      'tunnel CPU per request, h2 / HTTP/1.1, at 50 RPS',
    ]);
    expect(json.result.targets[1]!.measured).toBeGreaterThan(0);
    expect(md).toContain('| target | limit | measured | status |');
    expect(md).toContain('| h2 tunnel | closed loop, 2 × 2 streams | h2load |');
    expect(html).toContain('<h2>Targets</h2>');
    expect(run.stderr).toContain('tunnel CPU per request, h2 / HTTP/1.1, at 50 RPS: ');
  });

  it('grpc: unary calls and a bidi stream direct and through the tunnel (--h2c), with RSS through the stream', async () => {
    const out = join(work, 'grpc');
    const run = await runBench(
      'grpc --rate 50 --concurrency 4 --duration 1 --warmup 0 --message-kib 16 --out'.split(' ').concat(out),
    );
    expectRan(run, out);
    const { json, md } = read(out);
    expect(json).toMatchObject({ schemaVersion: 1, scenario: 'grpc' });
    expect(json.result.rows.map((r) => [r.label, r.mode])).toEqual([
      ['http/1.1 tunnel', 'rate'],
      ['grpc unary direct', 'rate'],
      ['grpc unary tunnel', 'rate'],
      ['grpc unary direct', 'closed'],
      ['grpc unary tunnel', 'closed'],
      ['grpc bidi direct', 'stream'],
      ['grpc bidi tunnel', 'stream'],
    ]);
    expectMeasured(rowOf(json, 'http/1.1 tunnel', 'rate'), ['edge', 'agent', 'backend']);
    for (const mode of ['rate', 'closed', 'stream'] as const) {
      const kind = mode === 'stream' ? 'grpc bidi' : 'grpc unary';
      expectMeasured(rowOf(json, `${kind} direct`, mode), ['backend']);
      expectMeasured(rowOf(json, `${kind} tunnel`, mode), ['edge', 'agent', 'backend']);
    }
    const stream = rowOf(json, 'grpc bidi tunnel', 'stream')!;
    expect(stream.bytesPerSec).toBeGreaterThan(0);
    for (const name of ['edge', 'agent', 'backend']) {
      expect(stream.rss![name]!.samples).toBeGreaterThanOrEqual(2);
      expect(stream.rss![name]!.maxMb).toBeGreaterThanOrEqual(stream.rss![name]!.firstMb);
    }
    expect(json.result.targets.map((t) => [t.name, t.met === null])).toEqual([
      ['failed calls, all rows', false],
      ['tunnel CPU per unary call / HTTP/1.1 tunnel CPU per request, same rate', false],
      ['bidi stream bytes per second, tunnel / direct', false],
      ['edge and agent RSS growth over the bidi stream (max − first)', false],
    ]);
    expect(md).toContain('RSS first → last (max), MiB');
  });

  it('tls: TLS at the edge beside HAProxy terminating TLS in front of the plain edge, over HTTP/1.1 and h2', async () => {
    const out = join(work, 'tls');
    const run = await runBench('tls --rates 50 --duration 1 --warmup 0 --out'.split(' ').concat(out));
    const json = expectRan(run, out);
    expect(json).toMatchObject({ schemaVersion: 1, scenario: 'tls' });
    expect(json.result.stack.haproxyUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expectMeasured(rowOf(json, 'http plain edge (no TLS)', 'rate'), ['edge', 'agent', 'backend']);
    expect(json.result.rows.map((r) => [r.label, r.generator])).toEqual([
      ['http plain edge (no TLS)', 'autocannon'],
      ['https TLS at the edge', 'autocannon'],
      ['https HAProxy + edge', 'autocannon'],
      ['h2 TLS at the edge', 'node:http2'],
      ['h2 HAProxy + edge', 'node:http2'],
    ]);
    for (const protocol of ['https', 'h2']) {
      const atEdge = rowOf(json, `${protocol} TLS at the edge`, 'rate');
      const target = json.result.targets.find((t) =>
        t.name.startsWith(`${protocol === 'h2' ? 'h2: ' : ''}CPU per request at 50 RPS`),
      );
      if (edgeServesTls) {
        expectMeasured(atEdge, ['edge', 'agent', 'backend']);
        expect(target?.measured).toBeGreaterThan(0);
      } else {
        expect(atEdge?.unavailable).toMatch(/^the edge did not start with --tls-cert\/--tls-key \(.+\)$/);
        expect(target).toMatchObject({ measured: null, met: null, unavailable: atEdge?.unavailable });
      }
    }
    // HAProxy speaks h2c to the edge for h2 clients: the edge's plain port takes the preface.
    expectMeasured(rowOf(json, 'h2 HAProxy + edge', 'rate'), ['haproxy', 'edge', 'agent', 'backend']);
    const haproxy = rowOf(json, 'https HAProxy + edge', 'rate');
    expectMeasured(haproxy, ['haproxy', 'edge', 'agent', 'backend']);
    // The terminating part: HAProxy and the edge, not the agent.
    expect(haproxy!.betweenCpuPerRequestUs).toBeCloseTo(
      haproxy!.cpuPerRequestUs.haproxy! + haproxy!.cpuPerRequestUs.edge!,
      1,
    );
  });

  it('refuses a flag another scenario takes, or a bad value, with exit 2 naming it, before anything starts', async () => {
    const unknown = await runBench(['h2', '--message-kib', '4']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("'--message-kib'");
    const zero = await runBench(['grpc', '--rate', '0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('--rate 0: expected a whole number ≥ 1');
    const rates = await runBench(['tls', '--rates', '100,x']);
    expect(rates.code).toBe(2);
    expect(rates.stderr).toContain('--rates x');
  });
});
