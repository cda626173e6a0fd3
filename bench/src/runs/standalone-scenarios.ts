import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import { BenchError, BenchErrorCode, usageError } from '../errors.js';
import { USAGE } from '../plan/cli-args.js';
import { type StandaloneName, WAN_USAGE } from '../plan/scenarios.js';
import { DEFAULT_LINK_BUFFER_BYTES } from '../processes/delay-link.js';
import { clusterGate, renderClusterMarkdown } from '../reports/cluster-report.js';
import {
  renderBulkMarkdown,
  renderFloorMarkdown,
  renderSessionsMarkdown,
  type StandaloneReport,
} from '../reports/standalone-report-md.js';
import { renderWanMarkdown, wanGate } from '../reports/wan-report.js';
import {
  type BulkResult,
  type BulkSideName,
  openBulkStack,
  runBulkBench,
} from '../scenarios/bulk-scenario.js';
import { runClusterBench } from '../scenarios/cluster-scenario.js';
import { type FloorResult, runFloorBench } from '../scenarios/floor-scenario.js';
import { runSessionsBench, type SessionsResult } from '../scenarios/sessions-scenario.js';
import { runWanBench } from '../scenarios/wan-scenario.js';
import { grpcCommand } from './grpc-command.js';
import { h2Command } from './h2-command.js';
import { commandLine, describeEnvironment } from './report-json.js';
import { runSideBySideCommand } from './side-by-side-command.js';
import { runTcpCommand } from './tcp-command.js';
import { tlsCommand } from './tls-command.js';

/**
 * Scenarios that are not stages of paced or closed-loop load: `bulk` (large transfers), `sessions` (many
 * idle sessions, many streams in one), `npx` (start-up time of the published package) and `floor` (the
 * tunnel beside a bare Node.js relay pair, three sides instead of two). Each writes
 * report.json (`schemaVersion` 1, `scenario`, `command`, `environment`, `result`, `gate`) and report.md.
 */
interface Gate {
  passed: boolean;
  violations: string[];
}

function positiveInt(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1) {
    throw usageError(`--${flag} ${text}: expected a positive integer`);
  }
  return value;
}

function wholeNumber(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) {
    throw usageError(`--${flag} ${text}: expected a whole number (0 or more)`);
  }
  return value;
}

function optionalNumber(flag: string, text: string | undefined): number | null {
  if (text === undefined) return null;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || value <= 0)
    throw usageError(`--${flag} ${text}: expected a positive number`);
  return value;
}

/** bulk's sides: by default the byte floor (relay) runs between direct and the tunnel. */
function sidesOf(only: string | undefined): BulkSideName[] {
  if (only === undefined) return ['direct', 'relay', 'tunnel'];
  if (only !== 'direct' && only !== 'relay' && only !== 'tunnel') {
    throw usageError(`--only ${only}: expected direct, relay or tunnel`);
  }
  return [only];
}

function parse(argv: string[], options: ParseArgsOptionsConfig) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw usageError(err instanceof Error ? err.message : String(err));
  }
}

function writeReports(outDir: string, json: unknown, markdown: string): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'report.json'), `${JSON.stringify(json, null, 2)}\n`);
  writeFileSync(join(outDir, 'report.md'), markdown);
}

/** `--min-floor-ratio`: tunnel ÷ byte floor per direction; a direction whose ratio is missing failed a transfer. */
function bulkGate(result: BulkResult, minMbps: number | null, minFloorRatio: number | null): Gate {
  const violations: string[] = [];
  for (const t of result.transfers) {
    if (t.error !== null) violations.push(`${t.direction} ${t.side}: ${t.error}`);
    else if (minMbps !== null && t.side === 'tunnel' && t.mbPerSec < minMbps) {
      violations.push(`${t.direction} tunnel: ${t.mbPerSec.toFixed(0)} MB/s < ${minMbps}`);
    }
  }
  if (minFloorRatio !== null) {
    for (const direction of ['download', 'upload'] as const) {
      const measured = result.ratios[direction].tunnelOverFloor;
      if (measured !== null && measured < minFloorRatio) {
        violations.push(`${direction}: tunnel / byte floor = ${measured.toFixed(2)}× < ${minFloorRatio}`);
      }
    }
  }
  return { passed: violations.length === 0, violations };
}

/** Lease lifetime in Redis mode: a third of it is one renewal round, so 15 s of idling sees 4 or 5. */
const BENCH_LEASE_TTL_SEC = 10;

/** `--registry` and `--lease-ttl`: null for the memory registry. */
function redisSettings(
  registry: string | undefined,
  leaseTtl: string | undefined,
): { leaseTtlSec: number } | null {
  if (registry !== undefined && registry !== 'memory' && registry !== 'redis') {
    throw usageError(`--registry ${registry}: expected memory or redis`);
  }
  if (registry !== 'redis') {
    if (leaseTtl !== undefined) throw usageError('--lease-ttl applies only with --registry redis');
    return null;
  }
  // The edge's own bound: leaseTtlMs is at least 1,000.
  const leaseTtlSec = optionalNumber('lease-ttl', leaseTtl) ?? BENCH_LEASE_TTL_SEC;
  if (leaseTtlSec < 1) throw usageError(`--lease-ttl ${leaseTtl}: at least 1 (s)`);
  return { leaseTtlSec };
}

export function sessionsGate(result: SessionsResult, maxKb: number | null): Gate {
  const violations: string[] = [];
  const { sessions, streams, redis } = result;
  if (redis !== null) {
    if (redis.renewalRounds === 0) violations.push('redis: no lease renewal round finished while idle');
    // Reads bound round trips from above by measurement alone; the target is at most 1.
    else if (!(redis.socketReadsPerSessionPerLease <= 1)) {
      violations.push(
        `redis: ${redis.socketReadsPerSessionPerLease.toFixed(3)} socket reads per session per lease > 1`,
      );
    }
  }
  if (sessions.opened !== sessions.requested) {
    violations.push(`${sessions.opened} of ${sessions.requested} sessions opened`);
  }
  if (sessions.lostWhileIdle > 0) violations.push(`${sessions.lostWhileIdle} sessions closed while idle`);
  if (maxKb !== null && !(sessions.edgeKbPerSession <= maxKb)) {
    violations.push(`${sessions.edgeKbPerSession.toFixed(1)} KB of edge RSS per session > ${maxKb}`);
  }
  if (streams.maxConcurrent !== streams.requested) {
    violations.push(`streams: at most ${streams.maxConcurrent} of ${streams.requested} were open at once`);
  }
  if (streams.answered !== streams.requested || streams.wrong > 0 || streams.failed > 0) {
    violations.push(
      `streams: ${streams.answered}/${streams.requested} answered, ${streams.wrong} wrong, ${streams.failed} failed`,
    );
  }
  return { passed: violations.length === 0, violations };
}

function floorGate(result: FloorResult): Gate {
  const violations = result.stages
    .filter((s) => s.errors > 0 || s.ok !== s.requests)
    .map((s) => `${s.side} ${s.mode}: ${s.errors} of ${s.requests} requests failed`);
  return { passed: violations.length === 0, violations };
}

/** `pnpm bench npx`: the start-up bench lives with the packaging script it depends on. */
function runNpx(argv: string[]): Promise<number> {
  const script = fileURLToPath(new URL('../../../scripts/bench-npx.ts', import.meta.url));
  return new Promise((done) => {
    const child = spawn(process.execPath, [script, ...argv], { stdio: 'inherit' });
    child.on('exit', (code, signal) => done(signal !== null ? 130 : (code ?? 3)));
  });
}

/** Runs a standalone scenario; answers the exit code (0 ok, 1 gate failed, 2 bad flags, 3 run failed). */
export async function runStandalone(
  name: StandaloneName,
  argv: string[],
  defaultOutDir: string,
  note: (line: string) => void,
): Promise<number> {
  if (name === 'npx') return runNpx(argv);
  if (name === 'tcp') return runTcpCommand(argv, defaultOutDir, note);
  if (name === 'h2') return runSideBySideCommand(name, h2Command, argv, defaultOutDir, note);
  if (name === 'grpc') return runSideBySideCommand(name, grpcCommand, argv, defaultOutDir, note);
  if (name === 'tls') return runSideBySideCommand(name, tlsCommand, argv, defaultOutDir, note);
  const flags = parse(argv, {
    out: { type: 'string' },
    only: { type: 'string' },
    size: { type: 'string' },
    'warmup-mib': { type: 'string' },
    cold: { type: 'boolean' },
    'min-mbps': { type: 'string' },
    'min-floor-ratio': { type: 'string' },
    sessions: { type: 'string' },
    streams: { type: 'string' },
    idle: { type: 'string' },
    concurrency: { type: 'string' },
    'max-kb-per-session': { type: 'string' },
    registry: { type: 'string' },
    'lease-ttl': { type: 'string' },
    rate: { type: 'string' },
    connections: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    rates: { type: 'string' },
    'fault-rate': { type: 'string' },
    settle: { type: 'string' },
    rtt: { type: 'string' },
    'time-limit': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (flags.help === true) {
    process.stdout.write(name === 'wan' ? WAN_USAGE : USAGE);
    return 0;
  }
  const applies: Record<StandaloneName, string[]> = {
    bulk: ['out', 'only', 'size', 'warmup-mib', 'min-mbps', 'min-floor-ratio', 'cold'],
    sessions: [
      'out',
      'sessions',
      'streams',
      'idle',
      'concurrency',
      'max-kb-per-session',
      'registry',
      'lease-ttl',
    ],
    npx: [],
    floor: ['out', 'rate', 'connections', 'duration', 'warmup'],
    cluster: ['out', 'rate', 'rates', 'duration', 'warmup', 'fault-rate', 'settle'],
    wan: ['out', 'rtt', 'size', 'time-limit'],
    tcp: [],
    // Their own commands (side-by-side-command.ts) parse their flags.
    h2: [],
    grpc: [],
    tls: [],
  };
  for (const flag of Object.keys(flags)) {
    if (!applies[name].includes(flag)) throw usageError(`--${flag} does not apply to the ${name} scenario`);
  }
  const str = (key: string): string | undefined => {
    const value = flags[key];
    return typeof value === 'string' ? value : undefined;
  };
  const outDir = resolve(process.env.INIT_CWD ?? process.cwd(), str('out') ?? defaultOutDir);
  const startedAt = new Date();
  const header = () => ({
    schemaVersion: 1,
    scenario: name,
    command: commandLine([name, ...argv]),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    environment: describeEnvironment(),
  });

  /** Runs one scenario, gates it and writes its reports; a run that fails is exit 3, bad flags stay usage errors. */
  const runAndReport = async <R, G extends Gate>(
    run: () => Promise<R>,
    gateOf: (result: R) => G,
    render: (report: StandaloneReport<R> & { gate: G }) => string,
  ): Promise<number> => {
    try {
      const result = await run();
      const gate = gateOf(result);
      const report = { ...header(), result, gate };
      writeReports(outDir, report, render(report));
      process.stdout.write(`${outDir}\n`);
      return gate.passed ? 0 : 1;
    } catch (err) {
      if (err instanceof BenchError && err.code === BenchErrorCode.USAGE) throw err;
      note(`the run failed: ${err instanceof Error ? err.message : String(err)}`);
      return 3;
    }
  };

  if (name === 'bulk') {
    const cold = flags.cold === true;
    if (cold && str('warmup-mib') !== undefined) throw usageError('--warmup-mib does not apply with --cold');
    const sizeMiB = positiveInt('size', str('size'), cold ? 100 : 1024);
    const warmupMiB = cold ? 0 : wholeNumber('warmup-mib', str('warmup-mib'), 128);
    const minMbps = optionalNumber('min-mbps', str('min-mbps'));
    const minFloorRatio = optionalNumber('min-floor-ratio', str('min-floor-ratio'));
    const sides = sidesOf(str('only'));
    if (minFloorRatio !== null && sides.length === 1) {
      throw usageError('--min-floor-ratio compares the tunnel with the relay: it cannot go with --only');
    }
    return runAndReport(
      () =>
        runBulkBench(
          openBulkStack,
          { bytes: sizeMiB * 2 ** 20, sides, warmupBytes: warmupMiB * 2 ** 20, cold },
          note,
        ),
      (result) => bulkGate(result, minMbps, minFloorRatio),
      renderBulkMarkdown,
    );
  }

  if (name === 'floor') {
    const settings = {
      ratePerSec: positiveInt('rate', str('rate'), 1000),
      connections: positiveInt('connections', str('connections'), 100),
      durationSec: positiveInt('duration', str('duration'), 20),
      warmupSec: wholeNumber('warmup', str('warmup'), 5),
      path: '/loadtest/get',
    };
    return runAndReport(() => runFloorBench(settings, note), floorGate, renderFloorMarkdown);
  }

  if (name === 'cluster') {
    const ratesText = str('rates') ?? str('rate');
    const settings = {
      rates:
        ratesText === undefined ? [500] : ratesText.split(',').map((r) => positiveInt('rates', r.trim(), 1)),
      durationSec: positiveInt('duration', str('duration'), 20),
      warmupSec: wholeNumber('warmup', str('warmup'), 5),
      faultRate: positiveInt('fault-rate', str('fault-rate'), 200),
      settleSec: positiveInt('settle', str('settle'), 3),
      path: '/loadtest/get',
    };
    return runAndReport(() => runClusterBench(settings, note), clusterGate, renderClusterMarkdown);
  }

  if (name === 'wan') {
    const settings = {
      rttMs: positiveInt('rtt', str('rtt'), 50),
      bytes: positiveInt('size', str('size'), 256) * 2 ** 20,
      timeLimitSec: positiveInt('time-limit', str('time-limit'), 40),
      parallelStreams: 6,
      parallelBytesEach: Math.min(32 * 2 ** 20, positiveInt('size', str('size'), 256) * 2 ** 20),
      ttfbSamples: 20,
      ttfbIntervalMs: 100,
      linkBufferBytes: DEFAULT_LINK_BUFFER_BYTES,
    };
    return runAndReport(() => runWanBench(settings, note), wanGate, renderWanMarkdown);
  }

  const maxKb = optionalNumber('max-kb-per-session', str('max-kb-per-session'));
  const settings = {
    sessions: positiveInt('sessions', str('sessions'), 10_000),
    streams: positiveInt('streams', str('streams'), 1_000),
    idleSec: positiveInt('idle', str('idle'), 15),
    connectConcurrency: positiveInt('concurrency', str('concurrency'), 100),
    redis: redisSettings(str('registry'), str('lease-ttl')),
  };
  if (settings.redis !== null && settings.idleSec < settings.redis.leaseTtlSec) {
    throw usageError(
      `--idle ${settings.idleSec} is shorter than the lease (--lease-ttl ${settings.redis.leaseTtlSec}): ` +
        'the sessions must stay idle through a whole lease period',
    );
  }
  return runAndReport(
    () => runSessionsBench(settings, note),
    (result) => sessionsGate(result, maxKb),
    renderSessionsMarkdown,
  );
}
