import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { compareUsage, runCompare, wantsHelp } from './compare/compare-command.js';
import { BenchError, BenchErrorCode } from './errors.js';
import { type BenchOptions, parseBenchArgs, USAGE } from './plan/cli-args.js';
import { isStandalone, planStages } from './plan/scenarios.js';
import { planWarmup, warmupGiven } from './plan/warmup-plan.js';
import { renderHtml } from './reports/report-html.js';
import { renderMarkdown } from './reports/report-md.js';
import { preflight } from './runs/preflight.js';
import { createProgress } from './runs/progress.js';
import { buildReport, renderJson } from './runs/report-json.js';
import { runScenario } from './runs/run-scenario.js';
import { type ScenarioStack, stackSides, startScenarioStack, targetSide } from './runs/target-stack.js';
import { runtime } from './runtime-paths.js';

/** Exit codes: the contract CI scripts rely on. */
const EXIT = { OK: 0, GATE_FAILED: 1, USAGE: 2, RUN_FAILED: 3, INTERRUPTED: 130 } as const;

const argv = process.argv.slice(2);
const writeErr = (text: string): void => void process.stderr.write(text);

function parseOrExit(): BenchOptions {
  try {
    const parsed = parseBenchArgs(
      argv,
      // pnpm runs the script from the repository root; --out is relative to where the user typed it.
      process.env.INIT_CWD ?? process.cwd(),
      runtime.resultsRoot(),
    );
    if (parsed.help) {
      process.stdout.write(USAGE);
      process.exit(EXIT.OK);
    }
    return parsed.options;
  } catch (err) {
    if (err instanceof BenchError && err.code === BenchErrorCode.USAGE) {
      writeErr(`bench: ${err.message}\n(${runtime.command} --help lists the scenarios and flags)\n`);
      process.exit(EXIT.USAGE);
    }
    throw err;
  }
}

const standalone = argv[0];
const targetFlag = argv.find((arg) => /^--(target|tunnel-url)(=|$)/.test(arg));
if (standalone === 'compare') {
  // Two finished runs, no load: the same in the repository and in the published package.
  const cwd = process.env.INIT_CWD ?? process.cwd();
  try {
    if (wantsHelp(argv)) process.stdout.write(compareUsage(runtime.command));
    else {
      const io = {
        out: (text: string) => void process.stdout.write(text),
        note: (line: string) => writeErr(`${line}\n`),
      };
      process.exitCode = runCompare(argv.slice(1), cwd, io).code;
    }
  } catch (err) {
    if (!(err instanceof BenchError)) throw err;
    const hint = err.code === BenchErrorCode.USAGE ? `\n(${runtime.command} compare --help)` : '';
    writeErr(`bench: ${err.message}${hint}\n`);
    process.exitCode = EXIT.USAGE;
  }
} else if (isStandalone(standalone) && targetFlag !== undefined) {
  // bulk, sessions, floor ... measure tunnel2 itself against the test backend's own endpoints.
  writeErr(
    `bench: ${targetFlag.split('=')[0]} applies to ramp, spike, constant and max, not ${standalone}\n`,
  );
  process.exitCode = EXIT.USAGE;
} else if (isStandalone(standalone) && !runtime.standalone) {
  writeErr(
    `bench: ${standalone} runs from the tunnel2 repository (pnpm bench ${standalone}), not this package\n`,
  );
  process.exitCode = EXIT.USAGE;
} else if (isStandalone(standalone)) {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const defaultOut = join(runtime.resultsRoot(), `${standalone}-${stamp}`);
  const note = (line: string): void => writeErr(`[${standalone}] ${line}\n`);
  try {
    // Loaded here only: they need the repository (Redis, HAProxy, ...), and the published bundle stubs them.
    const { runStandalone } = await import('./runs/standalone-scenarios.js');
    process.exitCode = await runStandalone(standalone, argv.slice(1), defaultOut, note);
  } catch (err) {
    if (!(err instanceof BenchError && err.code === BenchErrorCode.USAGE)) throw err;
    writeErr(`bench: ${err.message}\n(pnpm bench --help lists the scenarios and flags)\n`);
    process.exitCode = EXIT.USAGE;
  }
} else {
  const options = parseOrExit();
  if (options.edgeWorkers === null) await runStaged(options);
  else await runPerEdgeWorkers(options, options.edgeWorkers);
}

/**
 * --edge-workers 1,2: the whole run once per count, the kit's edge with `--workers <n>` (through
 * TUNNEL2_WORKERS, which the edge reads and its children inherit), then the tunnel side's throughput and
 * CPU per request side by side. The edge's CPU counts its workers (process-stats.ts).
 */
async function runPerEdgeWorkers(options: BenchOptions, counts: number[]): Promise<void> {
  const rows: string[] = [];
  for (const count of counts) {
    process.env.TUNNEL2_WORKERS = String(count);
    const outDir = join(options.outDir, `workers-${count}`);
    writeErr(`bench: edge with --workers ${count}\n`);
    await runStaged({ ...options, outDir });
    if (process.exitCode !== undefined && process.exitCode !== EXIT.OK) return;
    const report = JSON.parse(readFileSync(join(outDir, 'report.json'), 'utf8')) as {
      stages: Array<{
        connections: number;
        tunnel: {
          achievedRps: number;
          edge: { cpuPerRequestUs: number | null } | null;
          agent: { cpuPerRequestUs: number | null } | null;
        } | null;
      }>;
    };
    for (const stage of report.stages) {
      const t = stage.tunnel;
      if (t === null) continue;
      const us = (v: number | null | undefined): string =>
        v === null || v === undefined ? '-' : v.toFixed(0);
      rows.push(
        `| ${count} | ${stage.connections} | ${t.achievedRps.toFixed(0)} | ${us(t.edge?.cpuPerRequestUs)} | ${us(t.agent?.cpuPerRequestUs)} |`,
      );
    }
  }
  delete process.env.TUNNEL2_WORKERS;
  process.stdout.write(
    `${['| edge workers | connections | tunnel req/s | edge CPU µs/req | agent CPU µs/req |', '| --- | --- | --- | --- | --- |', ...rows].join('\n')}\n`,
  );
}

async function runStaged(options: BenchOptions): Promise<void> {
  const plan = planStages(options);
  const progress = createProgress(options.scenario, {
    write: writeErr,
    interactive: process.stderr.isTTY === true,
  });

  let stack: ScenarioStack | undefined;
  // No child may outlive the bench, whatever ends it.
  process.on('exit', () => stack?.kill());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      writeErr(`\nbench: ${signal}, stopping the stack\n`);
      void (stack?.close() ?? Promise.resolve()).finally(() => process.exit(EXIT.INTERRUPTED));
    });
  }

  try {
    const startedAt = new Date();
    const warmup = planWarmup(warmupGiven(argv) ? options.warmupSec : null);
    const loadSec =
      plan.reduce((sum, s) => sum + s.durationSec + warmup.secondsFor(s), 0) *
      (options.sides.length + (options.inspect === 'both' ? 1 : 0));
    const length = loadSec < 120 ? `${Math.ceil(loadSec)} s` : `${Math.ceil(loadSec / 60)} min`;
    progress.note(
      `${plan.length} stage(s) × ${options.sides.join(' + ')}, about ${length} of load; starting the stack`,
    );
    // The user's service first: when it is down or answers 404, nothing else needs to start.
    const direct = targetSide(options);
    if (direct !== undefined) await preflight(direct, options.request, options.timeoutSec);
    stack = await startScenarioStack(options);
    for (const side of stackSides(options, stack)) await preflight(side, options.request, options.timeoutSec);
    const described = stack.describe();
    progress.note(
      [
        described.backendUrl === ''
          ? ''
          : `${options.targetUrl === null ? 'backend' : 'target'} ${described.backendUrl}`,
        described.edgeUrl === null ? '' : `edge ${described.edgeUrl}`,
        described.tunnelUrl === null ? '' : `tunnel ${described.tunnelUrl}`,
      ]
        .filter((part) => part !== '')
        .join(', '),
    );
    const run = await runScenario(options, plan, stack, progress, warmup);
    await stack.close();
    const report = buildReport({
      options,
      argv,
      run,
      warmup,
      stack: described,
      startedAt,
      finishedAt: new Date(),
    });
    mkdirSync(options.outDir, { recursive: true });
    writeFileSync(join(options.outDir, 'report.json'), renderJson(report));
    writeFileSync(join(options.outDir, 'report.md'), renderMarkdown(report));
    writeFileSync(join(options.outDir, 'report.html'), renderHtml(report));
    // The answer the run was made for, where it was watched: no need to open a report to read it.
    if (report.verdict !== undefined) {
      progress.note(`verdict: ${report.verdict.summary}`);
      if (report.verdict.cost !== null) progress.note(`tunnel cost: ${report.verdict.cost}`);
    }
    progress.note(`reports written to ${options.outDir} (report.json, report.md, report.html)`);
    process.stdout.write(`${options.outDir}\n`);
    if (run.aborted !== null) {
      writeErr(`bench: the run stopped early: ${run.aborted}\n`);
      process.exitCode = EXIT.RUN_FAILED;
    } else if (!report.gate.passed) {
      writeErr(`bench: gate failed:\n${report.gate.violations.map((v) => `  ${v}`).join('\n')}\n`);
      process.exitCode = EXIT.GATE_FAILED;
    } else if (report.gate.failUnderPct !== null || report.gate.maxP99Ms !== null) {
      progress.note('gate passed');
    }
  } catch (err) {
    await stack?.close();
    writeErr(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = EXIT.RUN_FAILED;
  }
}
