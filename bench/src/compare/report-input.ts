import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BenchError, BenchErrorCode } from '../errors.js';

/** The report.json schema versions `compare` can read (report.schema.json's `schemaVersion`). */
export const KNOWN_SCHEMA_VERSIONS: readonly number[] = [1];

/** Why a report could not be compared; `code` is always TUNNEL2_ERR_BENCH_REPORT_INPUT. */
export type ReportInputReason = 'missing' | 'unreadable' | 'not-a-report' | 'schema-version' | 'scenario';

export class ReportInputError extends BenchError {
  readonly reason: ReportInputReason;
  constructor(reason: ReportInputReason, message: string, options?: { cause?: unknown }) {
    super(BenchErrorCode.REPORT_INPUT, message, options);
    this.reason = reason;
  }
}

/** A report as read: its JSON, untyped below the fields every scenario shares. */
export interface LoadedReport {
  /** The report.json read, as the user named it or inside the directory they named. */
  file: string;
  scenario: string;
  schemaVersion: number;
  command: string | null;
  startedAt: string | null;
  json: Record<string, unknown>;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Reads `path`: a run directory (its report.json) or a report.json itself. Every scenario's report shares
 * `schemaVersion`, `scenario` and `command`; what else it holds is read by figures.ts, ignoring fields it
 * does not know (a newer kit of the same version only adds fields).
 */
export function loadReport(path: string, cwd: string = process.cwd()): LoadedReport {
  const given = resolve(cwd, path);
  let file = given;
  try {
    if (statSync(given).isDirectory()) file = join(given, 'report.json');
  } catch (err) {
    throw new ReportInputError('missing', `${path}: no such file or directory`, { cause: err });
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw new ReportInputError(
      missing ? 'missing' : 'unreadable',
      missing ? `${path}: the directory holds no report.json` : `${file}: cannot be read (${errText(err)})`,
      { cause: err },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ReportInputError('unreadable', `${file}: not JSON (${errText(err)})`, { cause: err });
  }
  if (!isRecord(json) || typeof json.scenario !== 'string' || !('schemaVersion' in json)) {
    throw new ReportInputError(
      'not-a-report',
      `${file}: not a bench report (no "scenario" and "schemaVersion" fields)`,
    );
  }
  if (deeperThan(json, MAX_DEPTH)) {
    throw new ReportInputError(
      'not-a-report',
      `${file}: not a bench report (nested deeper than ${MAX_DEPTH} levels)`,
    );
  }
  const version = json.schemaVersion;
  if (typeof version !== 'number' || !KNOWN_SCHEMA_VERSIONS.includes(version)) {
    throw new ReportInputError(
      'schema-version',
      `${file}: schema version ${JSON.stringify(version)} is not one this kit reads ` +
        `(${KNOWN_SCHEMA_VERSIONS.join(', ')}); compare it with the kit that wrote it`,
    );
  }
  return {
    file,
    scenario: json.scenario,
    schemaVersion: version,
    command: typeof json.command === 'string' ? json.command : null,
    startedAt: typeof json.startedAt === 'string' ? json.startedAt : null,
    json,
  };
}

/** Both reports, checked to be of one scenario: figures of different scenarios share names, not meaning. */
export function loadPair(basePath: string, headPath: string, cwd?: string): [LoadedReport, LoadedReport] {
  const base = loadReport(basePath, cwd);
  const head = loadReport(headPath, cwd);
  if (base.scenario !== head.scenario) {
    throw new ReportInputError(
      'scenario',
      `the reports are of different scenarios: ${basePath} is ${base.scenario}, ${headPath} is ${head.scenario}`,
    );
  }
  return [base, head];
}

/**
 * No report nests past a dozen levels; figures.ts walks one recursively, so a file nested deeper (read as
 * hostile: a baseline can be anyone's file) is refused here instead of overflowing the stack, which Node
 * would end with exit 1, the code of a regression.
 */
const MAX_DEPTH = 64;

/** Whether `value` nests objects or arrays deeper than `limit`, measured without recursion. */
function deeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
