import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchError, BenchErrorCode, usageError } from '../errors.js';
import { renderTcpHtml, renderTcpMarkdown, tcpGate } from '../reports/tcp-report.js';
import { runTcpBench, type TcpSettings } from '../scenarios/tcp-scenario.js';
import { commandLine, describeEnvironment } from './report-json.js';

/** `pnpm bench tcp --help`. */
export const TCP_USAGE = `usage: pnpm bench tcp [flags]

A TCP tunnel (tunnel2 tcp <backend port> through tunnel2 server --tcp-ports) beside the backend reached
directly, in one run: closed-loop HTTP GETs at --connections (requests/s, ratio, edge + agent CPU per
request from /proc), then one download and one upload of --size MiB each way (MB/s, RSS of the edge and
the agent sampled start → peak → end). The floor, a bare two-process Node.js relay multiplexing the client
connections over one TCP connection (what any Node.js tunnel of this shape reaches here), is measured the
same way, alternated with both.

flags:
  --connections <n>   closed-loop connections (default 100)
  --duration <s>      seconds per closed-loop stage (default 15)
  --warmup <s>        discarded closed loop on each side first (default 5)
  --rounds <n>        direct and tunnel stages alternated n times; the summary takes medians (default 1)
  --path <path>       GET path on the test backend (default /loadtest/get, ~400 B of JSON)
  --size <MiB>        each transfer (default 1024; 0: no transfers)
  --warmup-mib <n>    discarded transfer of the same kind before each (default 128, or --size if smaller)
  --cpu-prof <dir>    the edge and the agent write V8 CPU profiles there (node --cpu-prof) when they stop
  --no-floor          do not measure the floor relay
  --floor-flags=<f>   lever flags for both halves of the floor relay, space-separated (bench/README.md,
                      "TCP floor levers"): --no-delay on|off, --coalesce <bytes>, --read-bytes <bytes>,
                      --high-water-mark <bytes>
  --out <dir>         report directory (default bench/results/tcp-<time>)
gates (exit 1 when missed; failed requests or transfers always fail it):
  --min-ratio <x>     closed loop tunnel / direct RPS at least x (issue #16 target: 0.5)
  --max-cpu-us <n>    edge + agent CPU per request at most n µs (target: 60)
  --min-mbps <n>      each tunnel transfer at least n MB/s (target: 800)
`;

function number(
  flag: string,
  text: string | undefined,
  fallback: number,
  min: number,
  integer: boolean,
): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || (integer && !Number.isSafeInteger(value)) || value < min) {
    throw usageError(`--${flag} ${text}: expected ${integer ? 'a whole number' : 'a number'} ≥ ${min}`);
  }
  return value;
}

function gateValue(flag: string, text: string | undefined): number | null {
  if (text === undefined) return null;
  const value = number(flag, text, 0, 0, false);
  if (value <= 0) throw usageError(`--${flag} ${text}: expected a positive number`);
  return value;
}

const FLOOR_FLAGS = new Set(['--no-delay', '--coalesce', '--read-bytes', '--high-water-mark']);

/** `--floor-flags`: flag and value pairs the relay knows, checked here so a typo fails before anything starts. */
function floorFlags(text: string | undefined): string[] {
  const words = (text ?? '').split(/\s+/).filter((w) => w !== '');
  for (let i = 0; i < words.length; i += 2) {
    const flag = words[i]!;
    const value = words[i + 1];
    const ok =
      FLOOR_FLAGS.has(flag) &&
      value !== undefined &&
      (flag === '--no-delay' ? value === 'on' || value === 'off' : /^\d+$/.test(value));
    if (!ok) throw usageError(`--floor-flags ${text}: ${flag} ${value ?? ''} is not a relay lever`);
  }
  return words;
}

/** Runs `pnpm bench tcp`; answers the exit code (0 ok, 1 gate failed, 2 bad flags, 3 run failed). */
export async function runTcpCommand(
  argv: string[],
  defaultOutDir: string,
  note: (line: string) => void,
): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        connections: { type: 'string' },
        duration: { type: 'string' },
        warmup: { type: 'string' },
        rounds: { type: 'string' },
        path: { type: 'string' },
        size: { type: 'string' },
        'warmup-mib': { type: 'string' },
        'cpu-prof': { type: 'string' },
        'no-floor': { type: 'boolean' },
        'floor-flags': { type: 'string' },
        out: { type: 'string' },
        'min-ratio': { type: 'string' },
        'max-cpu-us': { type: 'string' },
        'min-mbps': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (err) {
    throw usageError(err instanceof Error ? err.message : String(err));
  }
  if (values.help === true) {
    process.stdout.write(TCP_USAGE);
    return 0;
  }
  const str = (key: string): string | undefined => {
    const value = values[key];
    return typeof value === 'string' ? value : undefined;
  };
  const cwd = process.env.INIT_CWD ?? process.cwd();
  const path = str('path') ?? '/loadtest/get';
  if (!path.startsWith('/')) throw usageError(`--path ${path}: expected a path starting with /`);
  const cpuProf = str('cpu-prof');
  const sizeMib = number('size', str('size'), 1024, 0, true);
  const settings: TcpSettings = {
    connections: number('connections', str('connections'), 100, 1, true),
    durationSec: number('duration', str('duration'), 15, 1, true),
    warmupSec: number('warmup', str('warmup'), 5, 0, true),
    rounds: number('rounds', str('rounds'), 1, 1, true),
    path,
    bytes: sizeMib * 2 ** 20,
    // A warm-up larger than the transfer it warms up would be most of a short run.
    warmupBytes: number('warmup-mib', str('warmup-mib'), Math.min(128, sizeMib), 0, true) * 2 ** 20,
    cpuProfDir: cpuProf === undefined ? null : resolve(cwd, cpuProf),
    floor: values['no-floor'] !== true,
    floorFlags: floorFlags(str('floor-flags')),
  };
  const gateSettings = {
    minRatio: gateValue('min-ratio', str('min-ratio')),
    maxCpuUs: gateValue('max-cpu-us', str('max-cpu-us')),
    minMbps: gateValue('min-mbps', str('min-mbps')),
  };
  const outDir = resolve(cwd, str('out') ?? defaultOutDir);
  const startedAt = new Date();
  try {
    const result = await runTcpBench(settings, note);
    const gate = tcpGate(result, gateSettings);
    const report = {
      schemaVersion: 1,
      scenario: 'tcp',
      command: commandLine(['tcp', ...argv]),
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      environment: describeEnvironment(),
      result,
      gate,
    };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(outDir, 'report.md'), renderTcpMarkdown(report));
    writeFileSync(join(outDir, 'report.html'), renderTcpHtml(report));
    const s = result.summary;
    const x = (v: number | null | undefined): string => v?.toFixed(2) ?? '–';
    const r = s.ratios;
    const floorLine =
      r === undefined || !settings.floor
        ? ''
        : `; floor ${s.floorRps?.toFixed(0) ?? '–'} rps at ${s.floorCpuPerRequestUs?.toFixed(0) ?? '–'} µs/req, ` +
          `download ${s.downloadMbps.floor?.toFixed(0) ?? '–'} / upload ${s.uploadMbps.floor?.toFixed(0) ?? '–'} MB/s; ` +
          `RPS floor / direct ${x(r.rps.floorOverDirect)}, tunnel / floor ${x(r.rps.tunnelOverFloor)}; ` +
          `download floor / direct ${x(r.download.floorOverDirect)}, tunnel / floor ${x(r.download.tunnelOverFloor)}; ` +
          `upload floor / direct ${x(r.upload.floorOverDirect)}, tunnel / floor ${x(r.upload.tunnelOverFloor)}`;
    note(
      `closed loop tunnel / direct ${s.tunnelOverDirectRps?.toFixed(2) ?? '–'}, tunnel CPU ` +
        `${s.tunnelCpuPerRequestUs?.toFixed(0) ?? '–'} µs/req, download ${s.downloadMbps.tunnel?.toFixed(0) ?? '–'} ` +
        `/ upload ${s.uploadMbps.tunnel?.toFixed(0) ?? '–'} MB/s${floorLine}; reports in ${outDir}`,
    );
    if (!gate.passed) note(`gate failed:\n${gate.violations.map((v) => `  ${v}`).join('\n')}`);
    process.stdout.write(`${outDir}\n`);
    return gate.passed ? 0 : 1;
  } catch (err) {
    if (err instanceof BenchError && err.code === BenchErrorCode.USAGE) throw err;
    note(`the run failed: ${err instanceof Error ? err.message : String(err)}`);
    return 3;
  }
}
