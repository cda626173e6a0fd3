// The tunnel2 bench action's entry point (action.yml runs it with the inputs as INPUT_* variables).
// Runs the kit, appends report.md to $GITHUB_STEP_SUMMARY, sets the step's outputs in $GITHUB_OUTPUT, and
// exits with the kit's own exit code (0 done, 1 gate failed, 2 bad flags, 3 the run failed). Plain Node,
// no dependency: the test suite runs it as it is, with fake summary and output files.

import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const input = (name) => (process.env[`INPUT_${name}`] ?? '').trim();

/** The flag each scenario takes its load from. */
const LOAD_FLAG = { ramp: '--stages', spike: '--rates', constant: '--rate', max: '--connections' };

/** Splits extra flags as a shell would for words and quotes (no expansion): `--header 'a: b'` is two words. */
function splitArgs(text) {
  const words = [];
  let word = null;
  let quote = null;
  for (const ch of text) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      word ??= '';
    } else if (/\s/.test(ch)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? '') + ch;
    }
  }
  if (quote !== null) throw new Error(`args: unclosed ${quote}`);
  if (word !== null) words.push(word);
  return words;
}

/** The kit's command line from the action's inputs. */
function benchArgs(outDir) {
  const scenario = input('SCENARIO') || 'ramp';
  const args = [scenario, '--out', outDir];
  const add = (flag, value) => {
    if (value !== '') args.push(flag, value);
  };
  add('--target', input('TARGET'));
  add('--tunnel-url', input('TUNNEL_URL'));
  add(LOAD_FLAG[scenario] ?? '--stages', input('STAGES'));
  add('--duration', input('DURATION'));
  add('--fail-under', input('FAIL_UNDER'));
  add('--max-p99', input('MAX_P99'));
  return [...args, ...splitArgs(input('ARGS'))];
}

function output(name, value) {
  if (process.env.GITHUB_OUTPUT) appendFileSync(process.env.GITHUB_OUTPUT, `${name}=${value}\n`);
}

function summary(text) {
  if (process.env.GITHUB_STEP_SUMMARY) appendFileSync(process.env.GITHUB_STEP_SUMMARY, `${text}\n`);
}

const workspace = process.env.GITHUB_WORKSPACE || process.cwd();
const outDir = resolve(workspace, input('OUT') || 'bench-results');
const bench = input('BENCH') || '@tunnel2/bench';
const args = benchArgs(outDir);
// A built main.js runs as it is (this repository's own bench); anything else is an npm spec for npx.
const [command, commandArgs] = bench.endsWith('.js')
  ? [process.execPath, [resolve(workspace, bench), ...args]]
  : ['npx', ['--yes', bench, ...args]];
process.stderr.write(`bench action: ${[command, ...commandArgs].join(' ')}\n`);

const child = spawn(command, commandArgs, { stdio: ['ignore', 'inherit', 'inherit'], cwd: workspace });
const code = await new Promise((done) => {
  child.once('error', (err) => {
    process.stderr.write(`bench action: could not start ${command}: ${err.message}\n`);
    done(3);
  });
  child.once('exit', (exitCode, signal) => done(exitCode ?? (signal ? 128 : 3)));
});

const reportMd = resolve(outDir, 'report.md');
const reportJson = resolve(outDir, 'report.json');
let passed = false;
if (existsSync(reportMd)) {
  summary(readFileSync(reportMd, 'utf8'));
  passed = code === 0 && JSON.parse(readFileSync(reportJson, 'utf8')).gate?.passed === true;
  output('report-dir', outDir);
} else {
  summary(`The bench wrote no report (exit code ${code}): see the step's log.`);
}
output('passed', String(passed));
output('exit-code', String(code));
process.exitCode = code;
