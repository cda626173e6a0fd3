import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { StandaloneReport } from '../src/reports/standalone-report-md.js';
import type { WanGate } from '../src/reports/wan-report.js';
import type { BulkResult } from '../src/scenarios/bulk-scenario.js';
import type { FloorResult } from '../src/scenarios/floor-scenario.js';
import type { SessionsResult } from '../src/scenarios/sessions-scenario.js';
import type { WanResult } from '../src/scenarios/wan-scenario.js';
import { runBench } from './support/run-bench.js';

// `pnpm bench bulk` and `pnpm bench sessions` (memory and Redis registry) end to end, as the built bench runs them, at small sizes.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-standalone-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function report<R>(out: string): { json: StandaloneReport<R> & { schemaVersion: number }; md: string } {
  return {
    json: JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as StandaloneReport<R> & {
      schemaVersion: number;
    },
    md: readFileSync(join(out, 'report.md'), 'utf8'),
  };
}

describe('standalone bench scenarios (smoke)', () => {
  it('bulk: every byte of a download and an upload arrives on the three sides (direct, byte floor, tunnel), with RSS traced', async () => {
    const out = join(work, 'bulk');
    const run = await runBench(['bulk', '--size', '16', '--warmup-mib', '4', '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(out);
    const { json, md } = report<BulkResult>(out);
    expect(json.schemaVersion).toBe(1);
    expect(json.result.transfers.map((t) => [t.direction, t.side])).toEqual([
      ['download', 'direct'],
      ['download', 'relay'],
      ['download', 'tunnel'],
      ['upload', 'direct'],
      ['upload', 'relay'],
      ['upload', 'tunnel'],
    ]);
    for (const t of json.result.transfers) {
      expect(t.error).toBeNull();
      expect(t.bytes).toBe(16 * 2 ** 20);
      expect(t.mbPerSec).toBeGreaterThan(0);
      // The discarded warm-up of the same side and direction is reported beside the measured transfer.
      expect(t.warmup).toMatchObject({ bytes: 4 * 2 ** 20, error: null });
      expect(t.warmup!.mbPerSec).toBeGreaterThan(0);
      // The instrument's own cost is reported beside the processes it measures.
      expect(t.clientCpuMs).toBeGreaterThan(0);
      if (t.side === 'direct') expect(t.edge).toBeNull();
      else {
        // The relay's two processes are traced in the edge and agent columns, as the tunnel's are.
        expect(t.edge!.peakMb).toBeGreaterThanOrEqual(t.edge!.startMb);
        expect(t.agent!.peakMb).toBeGreaterThanOrEqual(t.agent!.startMb);
        expect(Number.isFinite(t.edge!.cpuMs) && Number.isFinite(t.agent!.cpuMs)).toBe(true);
        expect(t.edge!.cpuMs + t.agent!.cpuMs).toBeGreaterThan(0);
      }
    }
    // Issue #34's target 5 reads tunnel / byte floor from one run: every ratio of both directions is there.
    for (const direction of ['download', 'upload'] as const) {
      const ratios = json.result.ratios[direction];
      for (const value of [ratios.tunnelOverDirect, ratios.tunnelOverFloor, ratios.floorOverDirect]) {
        expect(Number.isFinite(value) && value! > 0, JSON.stringify(ratios)).toBe(true);
      }
      const mbps = (side: string) =>
        json.result.transfers.find((t) => t.direction === direction && t.side === side)!.mbPerSec;
      expect(ratios.tunnelOverFloor).toBeCloseTo(mbps('tunnel') / mbps('relay'), 9);
    }
    expect(json.gate).toEqual({ passed: true, violations: [] });
    expect(md).toContain('| direction | side | bytes | time | MB/s | warm-up (discarded) |');
    expect(md).toContain('| backend RSS · CPU | client CPU | error |');
    expect(md).toContain('| download | relay | 16 MiB |');
    expect(md).toContain('| 4 MiB at ');
    expect(run.stderr).toContain('download tunnel: warm-up 4 MiB (discarded): ');
    expect(run.stderr).toContain('download relay: warm-up 4 MiB (discarded): ');
    expect(md).toMatch(
      /^- download: tunnel \/ direct = [\d.]+×, tunnel \/ byte floor = [\d.]+×, byte floor \/ direct = [\d.]+×$/m,
    );
    expect(run.stderr).toMatch(/upload: tunnel \/ direct = [\d.]+×, tunnel \/ byte floor = [\d.]+×/);
  });

  it('bulk --cold: each transfer through freshly started processes, with no warm-up', async () => {
    const out = join(work, 'bulk-cold');
    const profiles = join(work, 'bulk-cold-profiles');
    // TUNNEL2_BENCH_NODE_OPTIONS reaches the edge and the agent (not the backend): a profile per thread of each
    // of the two pairs of fresh processes (the agent, its stdout a pipe, runs in a worker: two threads), written
    // as each exits (one stopped by SIGKILL after its grace writes none).
    const run = await runBench(['bulk', '--cold', '--size', '8', '--only', 'tunnel', '--out', out], {
      TUNNEL2_BENCH_NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profiles}`,
    });
    expect(run.code, run.stderr).toBe(0);
    const written = readdirSync(profiles).filter((file) => file.endsWith('.cpuprofile'));
    expect(written.length).toBeGreaterThanOrEqual(2);
    expect(written.length).toBeLessThanOrEqual(6);
    const { json, md } = report<BulkResult>(out);
    expect(json.result).toMatchObject({ cold: true, warmupBytes: 0 });
    expect(json.result.transfers.map((t) => [t.direction, t.warmup, t.error, t.bytes])).toEqual([
      ['download', null, null, 8 * 2 ** 20],
      ['upload', null, null, 8 * 2 ** 20],
    ]);
    expect(run.stderr.split('\n').filter((line) => line.endsWith('MiB, fresh processes'))).toHaveLength(2);
    expect(md).toContain('Cold (`--cold`)');
    const refused = await runBench(['bulk', '--cold', '--warmup-mib', '4']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--warmup-mib does not apply with --cold');
  });

  it('bulk: a --min-mbps gate no tunnel can meet exits 1 and names the transfer', async () => {
    const out = join(work, 'bulk-gate');
    const run = await runBench([
      'bulk',
      '--size',
      '4',
      '--only',
      'tunnel',
      '--min-mbps',
      '1000000',
      '--warmup-mib',
      '0',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(1);
    const { json, md } = report<BulkResult>(out);
    expect(json.result.transfers.every((t) => t.warmup === null)).toBe(true);
    expect(json.gate.violations).toHaveLength(2);
    expect(json.gate.violations[0]).toMatch(/^download tunnel: \d+ MB\/s < 1000000$/);
    expect(md).toContain('Gate: **failed**');
  });

  it('bulk: a --min-floor-ratio gate no tunnel can meet exits 1 and names each direction; it needs both sides', async () => {
    const out = join(work, 'bulk-floor-gate');
    const run = await runBench([
      'bulk',
      '--size',
      '4',
      '--warmup-mib',
      '0',
      '--min-floor-ratio',
      '1000',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(1);
    const { json } = report<BulkResult>(out);
    expect(json.result.transfers.every((t) => t.error === null)).toBe(true);
    expect(json.gate.violations).toHaveLength(2);
    expect(json.gate.violations[0]).toMatch(/^download: tunnel \/ byte floor = [\d.]+× < 1000$/);
    expect(json.gate.violations[1]).toMatch(/^upload: tunnel \/ byte floor = [\d.]+× < 1000$/);
    const refused = await runBench(['bulk', '--only', 'tunnel', '--min-floor-ratio', '0.85']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--min-floor-ratio compares the tunnel with the relay');
  });

  it('bulk --cold --only relay: the byte floor through fresh relay processes, every byte counted', async () => {
    const out = join(work, 'bulk-cold-relay');
    const run = await runBench(['bulk', '--cold', '--size', '4', '--only', 'relay', '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const { json } = report<BulkResult>(out);
    expect(json.result.transfers.map((t) => [t.direction, t.side, t.warmup, t.error, t.bytes])).toEqual([
      ['download', 'relay', null, null, 4 * 2 ** 20],
      ['upload', 'relay', null, null, 4 * 2 ** 20],
    ]);
    expect(json.result.transfers.every((t) => t.edge !== null && t.agent !== null)).toBe(true);
    // One side: nothing to compare, and nothing made up.
    expect(json.result.ratios.download).toEqual({
      tunnelOverDirect: null,
      tunnelOverFloor: null,
      floorOverDirect: null,
    });
  });

  it('sessions: many idle sessions stay open, and one session carries concurrent streams without mix-ups', async () => {
    const out = join(work, 'sessions');
    const run = await runBench([
      'sessions',
      '--sessions',
      '200',
      '--streams',
      '300',
      '--idle',
      '1',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md } = report<SessionsResult>(out);
    const { sessions, streams } = json.result;
    expect(sessions.opened).toBe(200);
    expect(sessions.lostWhileIdle).toBe(0);
    expect(sessions.edgeRssAfterMb).toBeGreaterThan(10);
    expect(Number.isFinite(sessions.edgeKbPerSession)).toBe(true);
    // The agent answers only once every stream is open, so all 300 were in flight at once.
    expect(streams).toMatchObject({ requested: 300, maxConcurrent: 300, answered: 300, wrong: 0, failed: 0 });
    expect(md).toContain('KB per session');
  });

  it('sessions --registry redis: a cluster node on a real redis-server, with what the leases cost Redis', async () => {
    const out = join(work, 'sessions-redis');
    const run = await runBench([
      ...'sessions --registry redis --lease-ttl 1 --sessions 200 --streams 50 --idle 2'.split(' '),
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md } = report<SessionsResult>(out);
    const { sessions, streams, redis } = json.result;
    expect(json.result.registry).toBe('redis');
    expect(sessions).toMatchObject({ opened: 200, lostWhileIdle: 0 });
    expect(sessions.claimsPerSec).toBeGreaterThan(0);
    expect(streams).toMatchObject({ requested: 50, maxConcurrent: 50, answered: 50, wrong: 0, failed: 0 });
    // A 1 s lease is renewed every third of a second: 2 s of idling sees several whole rounds.
    expect(redis!.renewalRounds).toBeGreaterThanOrEqual(2);
    // One renew script per session per round, and HMGET, HSET and PEXPIRE run inside it. A round is counted
    // when it starts, so one at either snapshot may reach Redis on the other side of it (a loaded CI machine
    // read 6 rounds of scripts in 7): within one round of one per session per round.
    const rounds = redis!.renewalRounds;
    const scriptRounds = redis!.scriptCallsPerSessionPerRound * rounds;
    expect(scriptRounds).toBeGreaterThanOrEqual(rounds - 1);
    expect(scriptRounds).toBeLessThanOrEqual(rounds + 1);
    expect(redis!.commandsByName).toMatchObject({ hmget: expect.any(Number), pexpire: expect.any(Number) });
    // 200 leases fit one pipelined batch: one round trip per round, far below one per session per lease.
    expect(redis!.roundTrips).toBe(redis!.renewalRounds);
    expect(redis!.socketReads).toBeGreaterThanOrEqual(redis!.roundTrips);
    expect(redis!.socketReadsPerSessionPerLease).toBeLessThanOrEqual(1);
    expect(redis!.usedMemoryAfterMb).toBeGreaterThan(redis!.usedMemoryBeforeMb);
    expect(redis!.bytesPerSession).toBeGreaterThan(0);
    expect(json.gate).toEqual({ passed: true, violations: [] });
    expect(md).toContain('## The Redis registry (cluster mode)');
    expect(md).toContain('round trips per session per lease');
  });

  it('sessions refuses an idle period shorter than the lease, and --lease-ttl without Redis', async () => {
    const short = await runBench(['sessions', '--registry', 'redis', '--lease-ttl', '20', '--idle', '5']);
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('--idle 5 is shorter than the lease (--lease-ttl 20)');
    const memory = await runBench(['sessions', '--lease-ttl', '5']);
    expect(memory.code).toBe(2);
    expect(memory.stderr).toContain('--lease-ttl applies only with --registry redis');
  });

  it('floor: direct, the byte relay, the HTTP relay and the tunnel answer every request, each with its CPU per request', async () => {
    const out = join(work, 'floor');
    const run = await runBench([
      'floor',
      '--rate',
      '100',
      '--connections',
      '4',
      '--duration',
      '2',
      '--warmup',
      '1',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const { json, md } = report<FloorResult>(out);
    const { stages, summary } = json.result;
    expect(stages.map((s) => [s.side, s.mode])).toEqual([
      ['direct', 'rate'],
      ['direct', 'closed'],
      ['relay', 'rate'],
      ['relay', 'closed'],
      ['http-relay', 'rate'],
      ['http-relay', 'closed'],
      ['tunnel', 'rate'],
      ['tunnel', 'closed'],
    ]);
    for (const stage of stages) {
      // Every request of every side is answered 2xx: the relay carries real HTTP through its two processes.
      expect(stage.errors).toBe(0);
      expect(stage.ok).toBe(stage.requests);
      expect(stage.ok).toBeGreaterThan(0);
      expect(stage.connections).toBe(stage.mode === 'rate' ? 10 : 4);
      if (stage.side === 'direct') expect(stage.betweenCpuPerRequestUs).toBeNull();
      else
        expect(stage.betweenCpuPerRequestUs).toBe(stage.edgeCpuPerRequestUs! + stage.agentCpuPerRequestUs!);
    }
    const rate = stages.find((s) => s.side === 'tunnel' && s.mode === 'rate')!;
    expect(rate.rps).toBeGreaterThan(80);
    expect(summary.tunnelOverRelayCpu).toBe(summary.tunnelCpuPerRequestUs! / summary.relayCpuPerRequestUs!);
    expect(summary.relayOverDirectRps).toBeGreaterThan(0);
    expect(summary.tunnelOverDirectRps).toBeGreaterThan(0);
    // The HTTP floor: a node:http edge and an undici agent carried real requests; its ratios are the stages'.
    const cpu = (side: string, mode: string) => stages.find((s) => s.side === side && s.mode === mode)!;
    expect(summary.httpRelayCpuPerRequestUs).toBe(cpu('http-relay', 'rate').betweenCpuPerRequestUs);
    expect(summary.httpRelayClosedCpuPerRequestUs).toBe(cpu('http-relay', 'closed').betweenCpuPerRequestUs);
    expect(summary.tunnelOverHttpRelayCpu).toBe(
      summary.tunnelCpuPerRequestUs! / summary.httpRelayCpuPerRequestUs!,
    );
    expect(summary.httpRelayOverRelayCpu).toBe(
      summary.httpRelayCpuPerRequestUs! / summary.relayCpuPerRequestUs!,
    );
    expect(summary.tunnelOverHttpRelayRps).toBe(
      cpu('tunnel', 'closed').rps / cpu('http-relay', 'closed').rps,
    );
    expect(summary.tunnelOverRelayRps).toBe(cpu('tunnel', 'closed').rps / cpu('relay', 'closed').rps);
    expect(summary.httpRelayOverDirectRps).toBeGreaterThan(0);
    expect(summary.httpRelayOverRelayRps).toBe(cpu('http-relay', 'closed').rps / cpu('relay', 'closed').rps);
    for (const key of [
      'tunnelOverRelayClosedCpu',
      'tunnelOverHttpRelayClosedCpu',
      'httpRelayOverRelayClosedCpu',
    ] as const) {
      expect(summary[key]).toBeGreaterThan(0);
    }
    expect(md).toContain(
      '| side | stage | connections | ok | rate (req/s) | p50 (ms) | p99 (ms) | worst second p99 (ms) | lowest second (req/s) |',
    );
    // A short stage's p99 is read from too few answers: marked, with the rule under the table.
    const stage = json.result.stages.find((s) => s.side === 'http-relay' && s.mode === 'rate')!;
    expect(stage.perSecond.reduce((sum, p) => sum + p.requests, 0)).toBe(stage.requests);
    expect(stage.lowSamplePercentiles).toEqual(stage.latencySamples < 1000 ? ['p99'] : []);
    if (stage.latencySamples < 1000) expect(md).toContain('~ = too few samples for this percentile');
    expect(md).toContain('| http-relay | 100 RPS |');
    expect(md).toContain('tunnel / floor = ');
    expect(md).toContain('tunnel / HTTP floor = ');
    expect(md).toContain('HTTP floor / byte floor = ');
    expect(run.stderr).toContain('[floor] relay 100 RPS: ');
    expect(run.stderr).toContain('[floor] http-relay 100 RPS: ');
    expect(run.stderr).toContain('tunnel / HTTP floor = ');
  });

  it('wan: every transfer through a delayed link arrives intact, with targets reported met or missed', async () => {
    const out = join(work, 'wan');
    const run = await runBench(['wan', '--rtt', '4', '--size', '4', '--time-limit', '30', '--out', out]);
    const { json, md } = report<WanResult>(out);
    const gate = json.gate as WanGate;
    // Whether a tiny link meets 3,000 / rtt MB/s is the machine's business; the exit code must say what the gate says.
    expect(run.code, run.stderr).toBe(gate.passed ? 0 : 1);
    const { result } = json;
    expect(result.settings).toMatchObject({ rttMs: 4, bytes: 4 * 2 ** 20, parallelStreams: 6 });
    for (const d of [result.download, result.upload]) {
      for (const t of [d.direct, d.tunnel]) {
        expect(t).toMatchObject({ bytes: 4 * 2 ** 20, error: null, verified: true, timeLimited: false });
      }
      expect(d.directMBps).toBe(d.direct.mbPerSec);
      expect(d.tunnelMBps).toBeGreaterThan(0);
      // The edge's and the agent's memory is measured on the tunnel side only.
      expect(d.tunnel.edge!.peakRssMb).toBeGreaterThan(10);
      expect(d.direct.edge).toBeNull();
    }
    expect(result.parallel.tunnel).toMatchObject({ bytes: 6 * 4 * 2 ** 20, error: null, verified: true });
    expect(result.edgePeakRssMb).toBeGreaterThan(10);
    expect(result.agentPeakRssMb).toBeGreaterThan(10);
    // Small requests cross the delayed link both ways: never faster than its round trip.
    expect(result.ttfb.idle).toMatchObject({ samples: 20, failed: 0 });
    expect(result.ttfb.direct).toMatchObject({ samples: 20, failed: 0 });
    expect(result.ttfb.direct.p50Ms).toBeGreaterThanOrEqual(4);
    expect(result.ttfb.idle.p50Ms).toBeGreaterThanOrEqual(4);
    expect(result.ttfb.underLoad).toMatchObject({ samples: 20, failed: 0 });
    expect(result.ttfb.directUnderLoad).toMatchObject({ samples: 20, failed: 0 });
    // 20 samples are enough for a p50 (20), not for a p95 (200): marked, with the rule.
    expect(result.ttfb.underLoad.lowSamplePercentiles).toEqual(['p95']);
    expect(md).toContain('| when | samples | failed | p50 (ms) | p95 (ms) | max (ms) |');
    expect(md).toContain('~ = too few samples for this percentile');
    expect(result.ttfb.directBulkMBps).toBeGreaterThan(0);
    expect(result.ttfb.bulkError).toBeNull();
    expect(result.ttfb.bulkMBps).toBeGreaterThan(0);
    expect(result.ttfb.benchLoopDelayMs.max).toBeGreaterThanOrEqual(result.ttfb.benchLoopDelayMs.p50);
    expect(gate.targets.map((t) => [t.what, t.limit])).toEqual([
      ['download through the tunnel', 750],
      ['upload through the tunnel', 750],
      ['download direct through the link alone', 2250],
      ['upload direct through the link alone', 2250],
      ['time to first byte of a small request during a download (p50)', 9],
    ]);
    expect(gate.passed).toBe(gate.targets.every((t) => t.met) && gate.violations.length === 0);
    expect(md).toContain('| transfer | side | moved | time | MB/s | time-limited | SHA-256 ok |');
    expect(md).toContain('## Targets (issue #21)');
  });

  it('wan: --help describes the scenario; a time limit cuts a transfer and says so', async () => {
    const help = await runBench(['wan', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: pnpm bench wan [--rtt <ms>] [--size <MiB>]');
    const out = join(work, 'wan-limited');
    // 1 s over a 200 ms round trip: far too short for 64 MiB through the tunnel, so its transfers are cut.
    const run = await runBench(['wan', '--rtt', '200', '--size', '64', '--time-limit', '1', '--out', out]);
    expect(run.code, run.stderr).toBe(1);
    const { result } = report<WanResult>(out).json;
    for (const t of [result.download.tunnel, result.upload.tunnel]) {
      expect(t.timeLimited).toBe(true);
      expect(t.error).toBeNull();
      expect(t.verified).toBe(true);
      expect(t.bytes).toBeLessThan(64 * 2 ** 20);
    }
  });

  it('refuses a flag that does not apply, before starting anything', async () => {
    const run = await runBench(['sessions', '--size', '4']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--size does not apply to the sessions scenario');
    const floor = await runBench(['floor', '--sessions', '4']);
    expect(floor.code).toBe(2);
    expect(floor.stderr).toContain('--sessions does not apply to the floor scenario');
  });
});
