// The bench action's comparison (the `baseline` input): finds the baseline report (a path, or the newest
// `artifact:<name>` of the default branch), runs the kit's `compare <baseline> <this run>`, and puts its
// Markdown in the job summary and, on a pull request, in one comment updated in place.

import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createGitHub } from './github-api.mjs';

const ARTIFACT = /^artifact:(.+)$/;

/**
 * Where the baseline report is, or why there is none. A missing artifact is not an error (the default
 * branch has not run the kit yet: the first run makes it); every other failure is.
 */
async function resolveBaseline(baseline, { workspace, dir, github, log }) {
  const artifact = ARTIFACT.exec(baseline);
  if (artifact === null) return { path: resolve(workspace, baseline) };
  const name = artifact[1].trim();
  const found = await github.findBaselineArtifact(name);
  if (found === null)
    return { none: `no artifact named ${name} on the default branch yet: nothing to compare with` };
  log(`baseline: artifact ${name} #${found.id} of ${found.branch} (${found.created_at ?? 'date unknown'})`);
  const text = await github.downloadReport(found);
  mkdirSync(dir, { recursive: true });
  const path = resolve(dir, 'report.json');
  writeFileSync(path, text);
  return { path };
}

/** The longest reason line kept from the kit's stderr (it goes into the job summary). */
const MAX_REASON = 1000;

/**
 * Runs the kit's compare, its stderr passed through to the log; answers its exit code (0 no regression,
 * 1 regression, 2 bad input) and the last `bench: ...` line it wrote, the reason a failed one gives.
 */
function runKitCompare(command, prefix, args) {
  return new Promise((done) => {
    const child = spawn(command, [...prefix, 'compare', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let reason = '';
    let partial = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      process.stderr.write(chunk);
      const lines = (partial + chunk).split('\n');
      partial = (lines.pop() ?? '').slice(0, MAX_REASON);
      for (const line of lines) if (line.startsWith('bench: ')) reason = line.slice(0, MAX_REASON);
    });
    child.once('error', (err) =>
      done({ code: 2, reason: `bench: could not start ${command}: ${err.message}` }),
    );
    child.once('close', (code) => done({ code: code ?? 2, reason }));
  });
}

function pullRequestNumber(env) {
  if (!/^pull_request(_target)?$/.test(env.GITHUB_EVENT_NAME ?? '') || !env.GITHUB_EVENT_PATH) return null;
  try {
    const event = JSON.parse(readFileSync(env.GITHUB_EVENT_PATH, 'utf8'));
    return event.pull_request?.number ?? event.number ?? null;
  } catch {
    return null;
  }
}

/**
 * Answers { code, compareDir } where code is the kit's compare exit code, or 0 when there was no baseline
 * to compare with, or 2 when the baseline could not be had.
 */
export async function compareWithBaseline({
  baseline,
  maxRegress,
  maxErrorRise = '',
  comment,
  commentKey,
  reportDir,
  workspace,
  kit,
  env,
  summary,
  output,
  log,
}) {
  const compareDir = resolve(reportDir, 'compare');
  const github = createGitHub({
    apiUrl: env.GITHUB_API_URL,
    repository: env.GITHUB_REPOSITORY,
    token: env.GITHUB_TOKEN ?? '',
  });
  let found;
  try {
    found = await resolveBaseline(baseline, {
      workspace,
      // The runner's temporary folder (emptied after each job), not the checkout a later step may commit.
      dir: env.RUNNER_TEMP
        ? resolve(env.RUNNER_TEMP, 'tunnel2-bench-baseline')
        : resolve(workspace, '.bench-baseline'),
      github,
      log,
    });
  } catch (err) {
    const line = `bench action: the baseline ${baseline} could not be fetched: ${err.message}`;
    log(line);
    summary(`\n> ${line}`);
    return { code: 2, compareDir: null };
  }
  if (found.none !== undefined) {
    log(`bench action: ${found.none}`);
    summary(`\n> ${found.none}.`);
    return { code: 0, compareDir: null };
  }
  // A reused workspace (a self-hosted runner) keeps the last run's compare/: a comparison that fails
  // now must not find that one and show it as its own.
  rmSync(compareDir, { recursive: true, force: true });
  const args = [found.path, reportDir, '--out', compareDir];
  if (maxRegress !== '') args.push('--max-regress', maxRegress);
  if (maxErrorRise !== '') args.push('--max-error-rise', maxErrorRise);
  let { code, reason } = await runKitCompare(kit.command, kit.prefix, args);
  let markdown = null;
  try {
    markdown = readFileSync(resolve(compareDir, 'compare.md'), 'utf8');
  } catch {
    summary(
      `\n> bench action: the comparison with ${baseline} wrote nothing (exit code ${code}): see the step's log.`,
    );
    if (reason !== '') summary(`>\n> ${reason}`);
    // A comparison that wrote nothing found no regression: it failed (a kit that died of an uncaught
    // error exits 1, the code of a regression).
    code = 2;
  }
  if (markdown !== null) {
    summary(`\n${markdown}`);
    output('compare-dir', compareDir);
    const number = comment ? pullRequestNumber(env) : null;
    if (number !== null) {
      try {
        const done = await github.upsertComment(number, markdown, commentKey);
        log(`bench action: comparison comment ${done.action} on #${number}`);
      } catch (err) {
        // A fork's pull request gets a read-only token: the summary still has the comparison.
        log(
          `bench action: could not comment on #${number} (permissions: pull-requests: write?): ${err.message}`,
        );
      }
    }
  }
  output('regressed', String(code === 1));
  return { code, compareDir };
}
