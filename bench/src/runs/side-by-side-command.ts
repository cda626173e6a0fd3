import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchError, BenchErrorCode, usageError } from '../errors.js';
import { type SideBySideResult, sideBySideGate } from '../measure/side-by-side-rows.js';
import {
  renderSideBySideHtml,
  renderSideBySideMarkdown,
  type SideBySideText,
} from '../reports/side-by-side-report.js';
import { commandLine, describeEnvironment } from './report-json.js';

/*
 * The command line of `pnpm bench h2`, `grpc` and `tls`: flags, the run, report.json / report.md /
 * report.html (`schemaVersion` 1, `scenario`, `command`, `environment`, `result`, `gate`, as `tcp`), and
 * one summary line per target on stderr.
 */

export type SideBySideName = 'h2' | 'grpc' | 'tls';

export type FlagValues = Record<string, string | boolean | undefined>;

export interface SideBySideCommand<S> {
  usage: string;
  text: SideBySideText;
  /** The flags this scenario takes (all strings, besides --help). */
  flags: readonly string[];
  settings(values: FlagValues): S;
  run(settings: S, note: (line: string) => void): Promise<SideBySideResult<S>>;
}

export function numberFlag(
  values: FlagValues,
  flag: string,
  fallback: number,
  min: number,
  integer = true,
): number {
  const text = values[flag];
  if (typeof text !== 'string') return fallback;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || (integer && !Number.isSafeInteger(value)) || value < min) {
    throw usageError(`--${flag} ${text}: expected ${integer ? 'a whole number' : 'a number'} ≥ ${min}`);
  }
  return value;
}

export function ratesFlag(values: FlagValues, flag: string, fallback: number[]): number[] {
  const text = values[flag];
  if (typeof text !== 'string') return fallback;
  return text.split(',').map((part) => numberFlag({ [flag]: part.trim() }, flag, 0, 1));
}

/** Runs one of the three; answers the exit code (0 ok, 1 gate failed, 2 bad flags, 3 run failed). */
export async function runSideBySideCommand<S>(
  name: SideBySideName,
  command: SideBySideCommand<S>,
  argv: string[],
  defaultOutDir: string,
  note: (line: string) => void,
): Promise<number> {
  let values: FlagValues;
  try {
    values = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        ...Object.fromEntries(command.flags.map((flag) => [flag, { type: 'string' as const }])),
        out: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (err) {
    throw usageError(err instanceof Error ? err.message : String(err));
  }
  if (values.help === true) {
    process.stdout.write(command.usage);
    return 0;
  }
  const settings = command.settings(values);
  const cwd = process.env.INIT_CWD ?? process.cwd();
  const out = values.out;
  const outDir = resolve(cwd, typeof out === 'string' ? out : defaultOutDir);
  const startedAt = new Date();
  try {
    const result = await command.run(settings, note);
    const gate = sideBySideGate(result);
    const report = {
      schemaVersion: 1,
      scenario: name,
      command: commandLine([name, ...argv]),
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      environment: describeEnvironment(),
      result,
      gate,
    };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(outDir, 'report.md'), renderSideBySideMarkdown(report, command.text));
    writeFileSync(join(outDir, 'report.html'), renderSideBySideHtml(report, command.text));
    for (const t of result.targets) {
      const state = t.met === null ? `not measured: ${t.unavailable}` : t.met ? 'met' : 'missed';
      note(`${t.name}: ${t.text} (target ${t.limit}) ${state}`);
    }
    if (!gate.passed) note(`gate failed:\n${gate.violations.map((v) => `  ${v}`).join('\n')}`);
    process.stdout.write(`${outDir}\n`);
    return gate.passed ? 0 : 1;
  } catch (err) {
    if (err instanceof BenchError && err.code === BenchErrorCode.USAGE) throw err;
    note(`the run failed: ${err instanceof Error ? err.message : String(err)}`);
    return 3;
  }
}
