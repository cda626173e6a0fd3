import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BenchError, BenchErrorCode, usageError } from '../errors.js';
import { renderCompareHtml } from './compare-html.js';
import { renderCompareMarkdown } from './compare-markdown.js';
import { verdictLine } from './compare-tables.js';
import {
  type Comparison,
  compareReports,
  DEFAULT_MAX_ERROR_RISE_PTS,
  DEFAULT_MAX_REGRESS_PCT,
} from './comparison.js';
import { loadPair } from './report-input.js';

export function compareUsage(command: string): string {
  return `Usage: ${command} compare <base> <head> [--max-regress <pct>] [--max-error-rise <pts>] [--out <dir>]

Compares two runs of one scenario (any: ramp, max, bulk, tcp, h2, cluster, ...), each a run directory or
its report.json: every figure both reports share, its change in %, and a mark where the change is beyond
the noise the reports themselves show. Markdown on stdout; --out <dir> also writes compare.md,
compare.html and compare.json.

  --max-regress <pct>  a p99, throughput, CPU per request or RSS figure worse by more than this, beyond
                       the noise and past what the machine moved it by, is a regression (default
                       ${DEFAULT_MAX_REGRESS_PCT}); a figure of a floor (the direct side, a relay) or with
                       no noise estimate (a one-shot transfer) is shown, never gated
  --max-error-rise <pts>
                       a success rate lower than base's by more than this many percentage points (errors
                       up) is a regression (default ${DEFAULT_MAX_ERROR_RISE_PTS})
  --out <dir>          where compare.md, compare.html and compare.json go

Exit codes: 0 no regression, 1 a regression (the figures are named on stderr), 2 bad flags, or a report
that is missing, unreadable, of a schema version this kit does not read, or of another scenario, or an
--out folder it cannot write.
`;
}

export interface CompareRun {
  code: 0 | 1;
  comparison: Comparison;
}

function threshold(flag: string, text: string | undefined, fallback: number, unit: string): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || !Number.isFinite(value)) {
    throw usageError(`${flag} ${text}: expected ${unit} (a number ≥ 0)`);
  }
  return value;
}

/**
 * `compare <base> <head>`: reads both, compares them, writes the Markdown to `out` and the files to
 * --out. Throws BenchError (TUNNEL2_ERR_BENCH_USAGE, TUNNEL2_ERR_BENCH_REPORT_INPUT,
 * TUNNEL2_ERR_BENCH_REPORT_OUTPUT) for exit code 2;
 * answers 1 on a regression.
 */
export function runCompare(
  argv: string[],
  cwd: string,
  io: { out: (text: string) => void; note: (line: string) => void },
): CompareRun {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw usageError(err instanceof Error ? err.message : String(err));
  }
  const [basePath, headPath, ...extra] = parsed.positionals;
  if (basePath === undefined || headPath === undefined || extra.length > 0) {
    throw usageError(
      'compare takes two reports: compare <base> <head> (run directories or report.json files)',
    );
  }
  const maxRegress = threshold(
    '--max-regress',
    parsed.values['max-regress'],
    DEFAULT_MAX_REGRESS_PCT,
    'a percentage',
  );
  const maxErrorRise = threshold(
    '--max-error-rise',
    parsed.values['max-error-rise'],
    DEFAULT_MAX_ERROR_RISE_PTS,
    'percentage points',
  );
  const [base, head] = loadPair(basePath, headPath, cwd);
  const comparison = compareReports(base, head, maxRegress, maxErrorRise);
  const markdown = renderCompareMarkdown(comparison);
  const outDir = parsed.values.out;
  if (outDir !== undefined) {
    const dir = resolve(cwd, outDir);
    // A folder it cannot write is exit 2, never an uncaught throw: Node exits 1 on those, which is the
    // code of a regression.
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'compare.md'), markdown);
      writeFileSync(join(dir, 'compare.html'), renderCompareHtml(comparison));
      writeFileSync(join(dir, 'compare.json'), `${JSON.stringify(comparison, null, 2)}\n`);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
      throw new BenchError(
        BenchErrorCode.REPORT_OUTPUT,
        `--out ${outDir}: cannot write the comparison (${code})`,
        { cause: err },
      );
    }
  }
  io.out(markdown);
  io.note(verdictLine(comparison));
  return { code: comparison.passed ? 0 : 1, comparison };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      'max-regress': { type: 'string' },
      'max-error-rise': { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}
