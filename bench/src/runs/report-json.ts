import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { totalsOf } from '../measure/side-report.js';
import type { BenchOptions } from '../plan/cli-args.js';
import { type BenchReport, SCHEMA_VERSION } from '../plan/report-schema.js';
import { redactArgv, redactHeaders } from '../plan/request-shape.js';
import type { WarmupPlan } from '../plan/warmup-plan.js';
import { evaluateGate } from '../reports/gate.js';
import { runtime } from '../runtime-paths.js';
import type { StackDescription } from '../stacks/bench-stack.js';
import { buildVerdict } from '../verdict/build-verdict.js';
import type { ScenarioRun } from './run-scenario.js';

function versionOf(packageName: string): string {
  const bundled = runtime.versions[packageName];
  if (bundled !== undefined) return bundled;
  try {
    const file = new URL(import.meta.resolve(`${packageName}/package.json`));
    return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Quotes an argument only when a shell would need it, so the command can be pasted back. */
function shellArg(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The command that made a report, quoted so it can be pasted back into a shell; secret headers redacted. */
export function commandLine(argv: string[]): string {
  return [...runtime.command.split(' '), ...redactArgv(argv)].map(shellArg).join(' ');
}

/** The machine and versions a report was measured on. */
export function describeEnvironment(): BenchReport['environment'] {
  const cpuList = cpus();
  return {
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    totalMemoryMb: Math.round(totalmem() / 2 ** 20),
    tunnel2: versionOf('@tunnel2/cli'),
    autocannon: versionOf('autocannon'),
  };
}

export interface ReportInput {
  options: BenchOptions;
  argv: string[];
  run: ScenarioRun;
  warmup: WarmupPlan;
  stack: StackDescription;
  startedAt: Date;
  finishedAt: Date;
}

export function buildReport(input: ReportInput): BenchReport {
  const { options, run } = input;
  const report: BenchReport = {
    schemaVersion: SCHEMA_VERSION,
    scenario: options.scenario,
    command: commandLine(input.argv),
    startedAt: input.startedAt.toISOString(),
    finishedAt: input.finishedAt.toISOString(),
    environment: describeEnvironment(),
    settings: {
      path: options.path,
      // What the first stage had: the field's meaning since schema 1.
      warmupSec: run.stages[0]?.warmupSec ?? 0,
      warmupRule: input.warmup.rule,
      timeoutSec: options.timeoutSec,
      sides: options.sides,
      backendUrl: input.stack.backendUrl,
      tunnelUrl: input.stack.tunnelUrl,
      inspect: options.inspect,
      ...(options.replicas > 1 ? { replicas: options.replicas } : {}),
      targetUrl: options.targetUrl,
      tunnelGiven: options.tunnelUrl !== null,
      request: {
        method: options.request.method,
        paths: options.request.paths,
        headers: redactHeaders(options.request.headers),
        bodyBytes: options.request.body?.length ?? 0,
        expectStatus: options.request.expectStatus,
      },
    },
    stages: run.stages,
    aborted: run.aborted,
    totals: { direct: totalsOf(run.stages, 'direct'), tunnel: totalsOf(run.stages, 'tunnel') },
    gate: evaluateGate(run.stages, options.sides, options, run.aborted),
  };
  report.verdict = buildVerdict(report);
  return report;
}

export function renderJson(report: BenchReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
