// The test command's typecheck, saying what it does while it does it: on a fresh clone `tsc -b` builds eight
// projects for a minute or more, silently, then `tsc -p tsconfig.check.json` checks the tests and scripts.
//
//   node scripts/typecheck.ts [--build-only]
//
// prints one line per project of the build (built, with its time, or up to date) and one for the check,
// and passes the compiler's diagnostics through. `tsc -b --verbose` says the same in 30 noisy lines; its
// lines are read here and reduced to those. Exits with the first failing compiler's code.

import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const tsc = require.resolve('typescript/bin/tsc');
const HEARTBEAT_MS = 15_000;

/** What one line of `tsc -b --verbose` says about a project, if it says anything we report. */
export type BuildEvent =
  | { kind: 'projects' }
  | { kind: 'up-to-date'; project: string }
  | { kind: 'out-of-date'; project: string }
  | { kind: 'building'; project: string }
  | { kind: 'skipped'; project: string; reason: string }
  | { kind: 'listed' }
  | { kind: 'timestamps' }
  | { kind: 'other' };

/** A project path as tsc prints it (absolute or relative, with its tsconfig.json) → `packages/cli`. */
function projectName(path: string): string {
  const rel = path.startsWith('/') ? relative(repoRoot, path) : path;
  return rel.replace(/\/?tsconfig\.json$/, '') || '(root)';
}

/** Reads one line of `tsc -b --verbose` output (the timestamp prefix is in the machine's locale). */
export function parseBuildLine(line: string): BuildEvent {
  const message = line.replace(/^.*? - (?=Project|Building|Updating|Skipping)/, '');
  let m = /^Projects in this build:/.exec(message);
  if (m) return { kind: 'projects' };
  if (/^ {4}\* /.test(line)) return { kind: 'listed' };
  m = /^Project '([^']+)' is up to date/.exec(message);
  if (m) return { kind: 'up-to-date', project: projectName(m[1]!) };
  m = /^Project '([^']+)' is out of date/.exec(message);
  if (m) return { kind: 'out-of-date', project: projectName(m[1]!) };
  m = /^Building project '([^']+)'/.exec(message);
  if (m) return { kind: 'building', project: projectName(m[1]!) };
  if (/^Updating output timestamps/.test(message)) return { kind: 'timestamps' };
  m = /^Skipping build of project '([^']+)' because (.*)$/.exec(message);
  if (m) return { kind: 'skipped', project: projectName(m[1]!), reason: m[2]! };
  return { kind: 'other' };
}

const say = (line: string): void => {
  process.stdout.write(`typecheck: ${line}\n`);
};
const seconds = (since: number): string => `${((performance.now() - since) / 1000).toFixed(1)} s`;

/** While a step runs, a line after each 15 s of it: a cold build or check takes a minute on a busy machine. */
function heartbeat(step: () => { what: string; since: number }): () => void {
  let last = { since: Number.NaN, said: 0 };
  const timer = setInterval(() => {
    const { what, since } = step();
    if (since !== last.since) last = { since, said: 0 };
    const elapsed = performance.now() - since;
    if (elapsed < (last.said + 1) * HEARTBEAT_MS) return;
    last.said = Math.floor(elapsed / HEARTBEAT_MS);
    say(`${what}: still working (${seconds(since)})`);
  }, 1000);
  timer.unref();
  return () => clearInterval(timer);
}

/** `tsc -b --verbose`, reduced to a line per project; the compiler's other output (diagnostics) as is. */
async function build(): Promise<number> {
  const started = performance.now();
  const pretty = process.stdout.isTTY ? ['--pretty'] : [];
  const child = spawn(process.execPath, [tsc, '-b', '--verbose', ...pretty], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let current: { project: string; since: number; failed: boolean } | undefined;
  let projects = 0;
  let announced = false;
  let built = 0;
  let inDiagnostic = false;
  const stop = heartbeat(() =>
    current ? { what: current.project, since: current.since } : { what: 'tsc -b', since: started },
  );
  const finish = (): void => {
    if (current === undefined) return;
    say(`${current.project} ${current.failed ? 'has errors' : 'built'} (${seconds(current.since)})`);
    current = undefined;
  };
  for await (const line of createInterface({ input: child.stdout })) {
    const event = parseBuildLine(line);
    if (event.kind === 'listed') {
      projects++;
      continue;
    }
    if (event.kind !== 'projects' && event.kind !== 'other' && !announced) {
      announced = true;
      // The root tsconfig.json only lists the others.
      say(`${projects - 1} projects (tsc -b)`);
    }
    if (event.kind === 'other') {
      // A diagnostic: the compiler's own text (blank lines only inside pretty diagnostics).
      if (line.trim() === '' && !inDiagnostic) continue;
      inDiagnostic = line.trim() !== '';
      if (current) current.failed = true;
      process.stdout.write(`${line}\n`);
      continue;
    }
    inDiagnostic = false;
    if (event.kind === 'up-to-date') {
      finish();
      if (event.project !== '(root)') say(`${event.project} up to date`);
    } else if (event.kind === 'building') {
      finish();
      built++;
      say(`${event.project}…`);
      current = { project: event.project, since: performance.now(), failed: false };
    } else if (event.kind === 'skipped') {
      finish();
      say(`${event.project} skipped: ${event.reason}`);
    }
  }
  const code = await new Promise<number>((resolve) => child.once('close', (c) => resolve(c ?? 1)));
  stop();
  finish();
  if (code !== 0) say(`tsc -b failed (exit ${code}) after ${seconds(started)}`);
  else say(`packages ${built === 0 ? 'up to date' : 'built'} in ${seconds(started)}`);
  return code;
}

/** `tsc -p tsconfig.check.json`: the tests and scripts, against the packages' declarations. */
async function check(): Promise<number> {
  const started = performance.now();
  say('tests and scripts (tsc -p tsconfig.check.json)…');
  const stop = heartbeat(() => ({ what: 'tests and scripts', since: started }));
  const pretty = process.stdout.isTTY ? ['--pretty'] : [];
  const child = spawn(process.execPath, [tsc, '-p', 'tsconfig.check.json', ...pretty], {
    cwd: repoRoot,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const code = await new Promise<number>((resolve) => child.once('close', (c) => resolve(c ?? 1)));
  stop();
  if (code !== 0) say(`tsc -p tsconfig.check.json failed (exit ${code}) after ${seconds(started)}`);
  else say(`tests and scripts checked in ${seconds(started)}`);
  return code;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // --build-only: the packages alone (`pnpm install`'s prepare, which builds a fresh clone for a minute).
  const code = await build();
  process.exitCode = code !== 0 || process.argv.includes('--build-only') ? code : await check();
}
