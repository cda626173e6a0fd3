// The tunnel2 bench action's entry point (action.yml runs it with the inputs as INPUT_* variables).
// Runs the kit, appends report.md to $GITHUB_STEP_SUMMARY, sets the step's outputs in $GITHUB_OUTPUT, and
// exits with the kit's own exit code (0 done, 1 gate failed, 2 bad flags, 3 the run failed). With a
// `baseline`, compares the run with it (compare-step.mjs) and exits 1 on a regression as well. Plain Node,
// no dependency: the test suite runs it as it is, with fake summary and output files and a local server
// standing in for the GitHub API.

import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { compareWithBaseline } from './compare-step.mjs';

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

/** The kit's own SECRET_HEADER (bench/src/plan/request-shape.ts): header values the log must not show. */
const SECRET_HEADER = /auth|cookie|token|secret|key|session|password|signature/i;

/** The command line as the log may show it: secret --header values replaced, as the kit's reports do. */
function redactArgs(words) {
  return words.map((word, i) => {
    const inline = word.startsWith('--header=');
    const text = inline ? word.slice('--header='.length) : words[i - 1] === '--header' ? word : undefined;
    const colon = text?.indexOf(':') ?? -1;
    if (colon < 0 || !SECRET_HEADER.test(text.slice(0, colon))) return word;
    return `${inline ? '--header=' : ''}${text.slice(0, colon)}: <redacted>`;
  });
}

/** The reason a failed run gives: the last `bench: ...` line of its stderr, kept while passing it through. */
function lastReasonOf(stream) {
  const MAX_LINE = 4096;
  let partial = '';
  let reason = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    process.stderr.write(chunk);
    const lines = (partial + chunk).split('\n');
    partial = (lines.pop() ?? '').slice(0, MAX_LINE);
    for (const line of lines) if (line.startsWith('bench: ')) reason = line.slice(0, MAX_LINE);
  });
  return () => (partial.startsWith('bench: ') ? partial : reason);
}

const workspace = process.env.GITHUB_WORKSPACE || process.cwd();
const outDir = resolve(workspace, input('OUT') || 'bench-results');
const bench = input('BENCH') || '@tunnel2/bench';
let args;
try {
  args = benchArgs(outDir);
} catch (err) {
  // A bad input is the user's flag error (exit 2, as the kit's own), not a failed gate.
  const line = `bench action: ${err.message}`;
  process.stderr.write(`${line}\n`);
  summary(line);
  output('passed', 'false');
  output('exit-code', '2');
  process.exit(2);
}
// A reused out folder keeps the previous run's reports: a run that writes none must not show them as its own.
for (const name of ['report.json', 'report.md', 'report.html'])
  rmSync(resolve(outDir, name), { force: true });
// A built main.js runs as it is (this repository's own bench); anything else is an npm spec for npx.
const [command, commandArgs] = bench.endsWith('.js')
  ? [process.execPath, [resolve(workspace, bench), ...args]]
  : ['npx', ['--yes', bench, ...args]];
process.stderr.write(`bench action: ${[command, ...redactArgs(commandArgs)].join(' ')}\n`);

const child = spawn(command, commandArgs, { stdio: ['ignore', 'inherit', 'pipe'], cwd: workspace });
const reason = lastReasonOf(child.stderr);
const code = await new Promise((done) => {
  child.once('error', (err) => {
    process.stderr.write(`bench action: could not start ${command}: ${err.message}\n`);
    done(3);
  });
  child.once('close', (exitCode, signal) => done(exitCode ?? (signal ? 128 : 3)));
});

const reportMd = resolve(outDir, 'report.md');
const reportJson = resolve(outDir, 'report.json');
let passed = false;
if (existsSync(reportMd)) {
  summary(readFileSync(reportMd, 'utf8'));
  try {
    passed = code === 0 && JSON.parse(readFileSync(reportJson, 'utf8')).gate?.passed === true;
  } catch {
    process.stderr.write(`bench action: ${reportJson} is missing or not JSON: passed=false\n`);
  }
  output('report-dir', outDir);
} else {
  summary(`The bench wrote no report (exit code ${code}): see the step's log.`);
}
// A run that failed (exit 3) says why in the summary, not only in the log.
if (code === 3 && reason() !== '') summary(`\n> ${reason()}`);

// The comparison needs a report of this run; a run that failed (exit 2 or 3) has none worth comparing.
let compareCode = 0;
const baseline = input('BASELINE');
if (baseline !== '' && (code === 0 || code === 1) && existsSync(reportJson)) {
  const compared = await compareWithBaseline({
    baseline,
    maxRegress: input('MAX_REGRESS'),
    maxErrorRise: input('MAX_ERROR_RISE'),
    comment: input('COMMENT') !== 'false',
    commentKey: input('ARTIFACT_NAME'),
    reportDir: outDir,
    workspace,
    kit: { command, prefix: commandArgs.slice(0, commandArgs.length - args.length) },
    env: process.env,
    summary,
    output,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  compareCode = compared.code;
  output('compare-exit-code', String(compareCode));
}
output('passed', String(passed && compareCode === 0));
output('exit-code', String(code));
// The run's own failure first (its code says what failed); then a regression (1) or a baseline that
// could not be read (2).
process.exitCode = code !== 0 ? code : compareCode;
