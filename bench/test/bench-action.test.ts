import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planActionlint } from './support/actionlint.js';
import { benchMain } from './support/run-bench.js';
import { stagedReport } from './support/synthetic-reports.js';
import { zipArchive } from './support/zip-writer.js';

// The reusable action (.github/actions/bench): its entry point run as the runner runs it, with fake
// GITHUB_STEP_SUMMARY and GITHUB_OUTPUT files, against a real local service; and actionlint on the
// repository's workflows (which use the action) and on the example workflow of docs/bench-action.md.

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const entry = join(repoRoot, '.github', 'actions', 'bench', 'run.mjs');
const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-action-'));
const apiKeys = new Set<string>();
let server: Server;
let target: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (apiKeys.size < 100) apiKeys.add(String(req.headers['x-api-key']));
    res.statusCode = req.url === '/health' ? 200 : 404;
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(work, { recursive: true, force: true });
});

interface ActionRun {
  code: number | null;
  stderr: string;
  summary: string;
  outputs: Record<string, string>;
}

/** Runs the action's entry point with these inputs, as action.yml does, in a fresh fake workspace. */
function runAction(
  name: string,
  inputs: Record<string, string>,
  prepare?: (workspace: string) => void,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<ActionRun> {
  const workspace = join(work, name);
  mkdirSync(workspace);
  prepare?.(workspace);
  const summaryFile = join(workspace, 'summary.md');
  const outputFile = join(workspace, 'output.txt');
  writeFileSync(summaryFile, '');
  writeFileSync(outputFile, '');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GITHUB_WORKSPACE: workspace,
    GITHUB_STEP_SUMMARY: summaryFile,
    GITHUB_OUTPUT: outputFile,
    INPUT_BENCH: benchMain,
    ...extraEnv,
  };
  for (const [key, value] of Object.entries(inputs)) env[`INPUT_${key}`] = value;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry], {
      env,
      cwd: workspace,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('exit', (code) => {
      const outputs = Object.fromEntries(
        readFileSync(outputFile, 'utf8')
          .split('\n')
          .filter((line) => line.includes('='))
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
      );
      resolve({ code, stderr, summary: readFileSync(summaryFile, 'utf8'), outputs });
    });
  });
}

describe('the bench action entry point', () => {
  const load = { SCENARIO: 'ramp', STAGES: '20', DURATION: '1' };

  it('runs the kit, puts report.md in the job summary and sets its outputs', async () => {
    const result = await runAction('ok', {
      ...load,
      TARGET: `${target}/health`,
      FAIL_UNDER: '99',
      ARGS: `--warmup 0 --only direct --header 'x-api-key: two words'`,
    });
    expect(result.code, result.stderr).toBe(0);
    // The command line the action echoes to the log hides header values as the report does.
    expect(result.stderr).toContain('x-api-key: <redacted>');
    expect(result.stderr).not.toContain('two words');
    expect(result.summary).toContain('# tunnel2 bench: Ramp');
    expect(result.summary).toContain('| # | load | side | achieved (req/s) |');
    expect(result.summary).toContain('**Gate: passed**');
    expect(result.summary).toContain("--header 'x-api-key: <redacted>'");
    const reportDir = join(work, 'ok', 'bench-results');
    expect(result.outputs).toEqual({ 'report-dir': reportDir, passed: 'true', 'exit-code': '0' });
    expect(existsSync(join(reportDir, 'report.html'))).toBe(true);
    // The quoted header reached the service as one value.
    expect([...apiKeys]).toEqual(['two words']);
  });

  it('a missed gate: exit 1, passed=false, the violation in the summary', async () => {
    const result = await runAction('gate', {
      ...load,
      TARGET: `${target}/health`,
      MAX_P99: '0.001',
      ARGS: '--warmup 0 --only direct',
    });
    expect(result.code, result.stderr).toBe(1);
    expect(result.summary).toContain('**Gate: FAILED**');
    expect(result.summary).toMatch(/corrected p99 .* > --max-p99 0\.001 ms/);
    expect(result.outputs).toMatchObject({ passed: 'false', 'exit-code': '1' });
  });

  it('a failed preflight: exit 3, no report, the summary says why', async () => {
    const result = await runAction('preflight', { ...load, TARGET: `${target}/missing` });
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('answered 404 on the direct side');
    expect(result.summary).toMatch(
      /^The bench wrote no report \(exit code 3\): see the step's log\.\n\n> bench: .*answered 404 on the direct side/,
    );
    expect(result.outputs).toEqual({ passed: 'false', 'exit-code': '3' });
  });

  it('a reused out folder: a failed run does not show the previous report as its own', async () => {
    const result = await runAction('stale', { ...load, TARGET: `${target}/missing` }, (workspace) => {
      const old = join(workspace, 'bench-results');
      mkdirSync(old);
      writeFileSync(join(old, 'report.md'), '# an old report\n');
      writeFileSync(join(old, 'report.json'), JSON.stringify({ gate: { passed: true } }));
      writeFileSync(join(old, 'report.html'), '<p>old</p>');
    });
    expect(result.code).toBe(3);
    expect(result.summary).not.toContain('an old report');
    expect(result.summary).toContain('The bench wrote no report (exit code 3)');
    expect(result.outputs).toEqual({ passed: 'false', 'exit-code': '3' });
    expect(existsSync(join(work, 'stale', 'bench-results', 'report.html'))).toBe(false);
  });

  it('an unclosed quote in args: exit 2 with one line saying so, outputs written, no stack trace', async () => {
    const result = await runAction('quote', {
      ...load,
      TARGET: `${target}/health`,
      ARGS: "--header 'x-api-key: secret",
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe("bench action: args: unclosed '\n");
    expect(result.summary).toContain("bench action: args: unclosed '");
    expect(result.outputs).toEqual({ passed: 'false', 'exit-code': '2' });
  });
});

/**
 * A ramp report at the action tests' load (20 req/s, 2 connections, direct only) that achieved 40 req/s:
 * a real run at 20 is a throughput regression against it.
 */
function fastBaseline(): string {
  const fig = { p99: 5, rps: 20, edgeCpu: 0, agentCpu: 0, edgeRss: 0 };
  const report = stagedReport('ramp', [{ rate: 20, connections: 2, direct: fig, tunnel: fig }]) as {
    stages: Array<{ direct: { achievedRps: number } }>;
  };
  report.stages[0]!.direct.achievedRps = 40;
  return JSON.stringify(report);
}

interface ApiCall {
  method: string;
  url: string;
  authorization: string | undefined;
  body: string;
}

interface FakeComment {
  id: number;
  body: string;
  user: { login: string; type: string };
}

/** Who the workflow's token comments as. */
const BOT = { login: 'github-actions[bot]', type: 'Bot' };

/** The repository id the fake API gives octo/app; a fork has another. */
const OCTO_APP_ID = 4242;

/** A local server standing in for api.github.com (the action reads GITHUB_API_URL, as on GHES). */
async function fakeGitHub(
  artifacts: (api: string) => object[],
  zips: Record<string, Buffer>,
  options: { denyArtifacts?: boolean; comments?: FakeComment[] } = {},
) {
  const calls: ApiCall[] = [];
  const comments: FakeComment[] = options.comments ?? [
    { id: 1, body: 'Looks good to me', user: { login: 'octocat', type: 'User' } },
  ];
  const api = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      calls.push({
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: req.headers.authorization,
        body,
      });
      const url = new URL(req.url ?? '/', 'http://x');
      const send = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (url.pathname === '/repos/octo/app') return send(200, { id: OCTO_APP_ID, default_branch: 'main' });
      if (url.pathname.startsWith('/repos/octo/app/actions/') && options.denyArtifacts) {
        // What GitHub answers a workflow token without `actions: read`.
        return send(403, { message: 'Resource not accessible by integration' });
      }
      if (url.pathname === '/repos/octo/app/actions/artifacts') {
        const list = artifacts(base).filter(
          (a) => (a as { name: string }).name === url.searchParams.get('name'),
        );
        return send(200, { total_count: list.length, artifacts: list });
      }
      const zip = /^\/repos\/octo\/app\/actions\/artifacts\/(\d+)\/zip$/.exec(url.pathname);
      if (zip) {
        // As GitHub does: a redirect to where the archive is stored.
        res.writeHead(302, { location: `${base}/blob/${zip[1]}` });
        return res.end();
      }
      const blob = /^\/blob\/(\d+)$/.exec(url.pathname);
      if (blob && zips[blob[1]!]) {
        res.writeHead(200, { 'content-type': 'application/zip' });
        return res.end(zips[blob[1]!]);
      }
      if (url.pathname === '/repos/octo/app/issues/7/comments' && req.method === 'GET')
        return send(200, comments);
      if (url.pathname === '/repos/octo/app/issues/7/comments' && req.method === 'POST') {
        const comment = { id: 100 + comments.length, body: JSON.parse(body).body as string, user: BOT };
        comments.push(comment);
        return send(201, comment);
      }
      const edit = /^\/repos\/octo\/app\/issues\/comments\/(\d+)$/.exec(url.pathname);
      if (edit && req.method === 'PATCH') {
        const comment = comments.find((c) => c.id === Number(edit[1]));
        if (comment === undefined) return send(404, { message: 'Not Found' });
        // The workflow's token edits only its own comments.
        if (comment.user.login !== BOT.login)
          return send(403, { message: 'Resource not accessible by integration' });
        comment.body = JSON.parse(body).body as string;
        return send(200, comment);
      }
      send(404, { message: 'Not Found' });
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => api.close(() => resolve()));
  return { base, calls, comments, close };
}

describe('the bench action compares with a baseline', () => {
  const load = { SCENARIO: 'ramp', STAGES: '20', DURATION: '1' };

  it('a baseline path: the comparison in the job summary and its outputs; no regression, exit 0', async () => {
    const first = await runAction('cmp-base', {
      ...load,
      TARGET: `${target}/health`,
      ARGS: '--warmup 0 --only direct',
    });
    expect(first.code, first.stderr).toBe(0);
    const result = await runAction('cmp-head', {
      ...load,
      TARGET: `${target}/health`,
      ARGS: '--warmup 0 --only direct',
      BASELINE: join(work, 'cmp-base', 'bench-results'),
      // Two one-second runs of a tiny load: only the mechanics are under test here, not the figures.
      MAX_REGRESS: '100000',
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.summary).toContain('# tunnel2 bench: Ramp');
    expect(result.summary).toContain('# tunnel2 bench compare: ramp');
    expect(result.summary).toContain('**No regression');
    const compareDir = join(work, 'cmp-head', 'bench-results', 'compare');
    expect(result.outputs).toMatchObject({
      passed: 'true',
      'exit-code': '0',
      'compare-exit-code': '0',
      regressed: 'false',
      'compare-dir': compareDir,
    });
    expect(existsSync(join(compareDir, 'compare.html'))).toBe(true);
  });

  it('a regression beyond max-regress fails the step (exit 1) with the figures in the summary', async () => {
    const result = await runAction(
      'cmp-regress',
      {
        ...load,
        TARGET: `${target}/health`,
        ARGS: '--warmup 0 --only direct',
        BASELINE: 'base/report.json',
        MAX_REGRESS: '20',
      },
      (workspace) => {
        mkdirSync(join(workspace, 'base'));
        writeFileSync(join(workspace, 'base', 'report.json'), fastBaseline());
      },
    );
    expect(result.code, result.stderr).toBe(1);
    expect(result.summary).toMatch(/\*\*Regression: .*stages\[rate 20 req\/s 2 conn\]\.direct\.achievedRps/);
    expect(result.outputs).toMatchObject({
      passed: 'false',
      'exit-code': '0',
      'compare-exit-code': '1',
      regressed: 'true',
    });
  });

  it('max-error-rise goes to the kit as --max-error-rise: a bad value is a usage error of the kit (exit 2)', async () => {
    const result = await runAction(
      'cmp-error-rise',
      {
        ...load,
        TARGET: `${target}/health`,
        ARGS: '--warmup 0 --only direct',
        BASELINE: 'base/report.json',
        MAX_ERROR_RISE: 'lots',
      },
      (workspace) => {
        mkdirSync(join(workspace, 'base'));
        writeFileSync(join(workspace, 'base', 'report.json'), fastBaseline());
      },
    );
    expect(result.code, result.stderr).toBe(2);
    expect(result.outputs).toMatchObject({ 'compare-exit-code': '2', passed: 'false' });
    expect(`${result.summary}\n${result.stderr}`).toContain('--max-error-rise lots');
  });

  it('a compare that crashed (exit 1 and nothing written) is not read as a regression', async () => {
    const result = await runAction(
      'cmp-crash',
      {
        ...load,
        TARGET: `${target}/health`,
        ARGS: '--warmup 0 --only direct',
        BASELINE: 'base/report.json',
        BENCH: 'kit.js',
      },
      (workspace) => {
        mkdirSync(join(workspace, 'base'));
        writeFileSync(join(workspace, 'base', 'report.json'), fastBaseline());
        // The kit, but its compare dies of an uncaught error, which Node ends with exit code 1.
        writeFileSync(
          join(workspace, 'kit.js'),
          `const { spawnSync } = require('node:child_process');
if (process.argv[2] === 'compare') throw new Error('a bug in compare');
const run = spawnSync(process.execPath, [${JSON.stringify(benchMain)}, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(run.status ?? 3);
`,
        );
      },
    );
    expect(result.code, result.stderr).toBe(2);
    expect(result.outputs).toMatchObject({ 'compare-exit-code': '2', regressed: 'false', passed: 'false' });
    expect(result.summary).toContain('wrote nothing (exit code 1)');
  });

  it('a reused out folder: a comparison that failed does not show the previous one as its own', async () => {
    const result = await runAction(
      'cmp-stale',
      {
        ...load,
        TARGET: `${target}/health`,
        ARGS: '--warmup 0 --only direct',
        // A report of another scenario: the kit's compare refuses it (exit 2) and writes nothing.
        BASELINE: 'base/report.json',
      },
      (workspace) => {
        mkdirSync(join(workspace, 'base'));
        writeFileSync(
          join(workspace, 'base', 'report.json'),
          JSON.stringify({ ...JSON.parse(fastBaseline()), scenario: 'max' }),
        );
        const old = join(workspace, 'bench-results', 'compare');
        mkdirSync(old, { recursive: true });
        writeFileSync(join(old, 'compare.md'), '# an old comparison\n');
      },
    );
    expect(result.code, result.stderr).toBe(2);
    expect(result.summary).not.toContain('an old comparison');
    expect(result.summary).toContain('wrote nothing (exit code 2)');
    // Why, in the summary itself: the kit's one line.
    expect(result.summary).toMatch(/> bench: the reports are of different scenarios: .* is max, .* is ramp/);
    expect(result.outputs).toMatchObject({ passed: 'false', 'compare-exit-code': '2' });
    expect(result.outputs['compare-dir']).toBeUndefined();
  });

  it('artifact:<name>: the newest of the default branch, and one pull request comment updated in place', async () => {
    const artifact =
      (id: number, branch: string, expired = false, headRepository = OCTO_APP_ID) =>
      (api: string) => ({
        id,
        name: 'bench-baseline',
        expired,
        created_at: `2026-11-0${id}T00:00:00Z`,
        workflow_run: { repository_id: OCTO_APP_ID, head_repository_id: headRepository, head_branch: branch },
        archive_download_url: `${api}/repos/octo/app/actions/artifacts/${id}/zip`,
      });
    // Newest first, as the API lists them: a pull request from a fork's own branch named main (its run's
    // head_branch is "main" too: were it taken, any fork could set the baseline), a pull request's upload
    // of the same name, an expired one of main, then main's.
    const github = await fakeGitHub(
      (api) => [
        artifact(5, 'main', false, 9999)(api),
        artifact(4, 'feature')(api),
        artifact(3, 'main', true)(api),
        artifact(2, 'main')(api),
      ],
      {
        '2': zipArchive({ 'report.md': '# old', 'report.json': fastBaseline() }),
        '5': zipArchive({ 'report.json': fastBaseline() }),
      },
    );
    try {
      const env = {
        GITHUB_API_URL: github.base,
        GITHUB_REPOSITORY: 'octo/app',
        GITHUB_EVENT_NAME: 'pull_request',
      };
      const inputs = {
        ...load,
        TARGET: `${target}/health`,
        ARGS: '--warmup 0 --only direct',
        BASELINE: 'artifact:bench-baseline',
        MAX_REGRESS: '20',
      };
      const event = (workspace: string) => {
        writeFileSync(join(workspace, 'event.json'), JSON.stringify({ pull_request: { number: 7 } }));
      };
      for (const name of ['cmp-pr-1', 'cmp-pr-2']) {
        const runnerTemp = join(work, `${name}-runner-temp`);
        mkdirSync(runnerTemp);
        const result = await runAction(name, inputs, event, {
          ...env,
          GITHUB_TOKEN: 'ghs_secret',
          GITHUB_EVENT_PATH: join(work, name, 'event.json'),
          RUNNER_TEMP: runnerTemp,
        });
        expect(result.code, result.stderr).toBe(1);
        // The downloaded baseline goes to the runner's temporary folder, not into the checkout where a
        // later step (a commit, a lint) would find it.
        expect(existsSync(join(work, name, '.bench-baseline'))).toBe(false);
        expect(existsSync(join(runnerTemp, 'tunnel2-bench-baseline', 'report.json'))).toBe(true);
        expect(result.summary).toContain('# tunnel2 bench compare: ramp');
        expect(result.stderr).toContain('baseline: artifact bench-baseline #2 of main');
      }
      // Only main's unexpired artifact was downloaded; the first run added the comment, the second edited it.
      const writes = github.calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.url}`);
      expect(writes).toEqual([
        'POST /repos/octo/app/issues/7/comments',
        'PATCH /repos/octo/app/issues/comments/101',
      ]);
      expect(github.calls.filter((c) => c.url.includes('/zip')).map((c) => c.url)).toEqual([
        '/repos/octo/app/actions/artifacts/2/zip',
        '/repos/octo/app/actions/artifacts/2/zip',
      ]);
      expect(new Set(github.calls.map((c) => c.authorization))).toEqual(new Set(['Bearer ghs_secret']));
      expect(github.comments).toHaveLength(2);
      expect(github.comments[1]!.body).toMatch(
        /^<!-- tunnel2-bench-compare -->\n# tunnel2 bench compare: ramp/,
      );
      expect(github.comments[1]!.body).toContain('**Regression');
    } finally {
      await github.close();
    }
  });

  it('artifact:<name> before the default branch has one: the run passes and the summary says so', async () => {
    const github = await fakeGitHub(() => [], {});
    try {
      const result = await runAction(
        'cmp-none',
        {
          ...load,
          TARGET: `${target}/health`,
          ARGS: '--warmup 0 --only direct',
          BASELINE: 'artifact:bench-baseline',
        },
        undefined,
        {
          GITHUB_API_URL: github.base,
          GITHUB_REPOSITORY: 'octo/app',
          GITHUB_TOKEN: 't',
          GITHUB_EVENT_NAME: 'push',
        },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(result.summary).toContain('no artifact named bench-baseline on the default branch yet');
      expect(result.outputs).toMatchObject({ passed: 'true', 'compare-exit-code': '0' });
    } finally {
      await github.close();
    }
  });
});

describe('the bench action baseline: a hostile or locked-down repository', () => {
  const inputs = {
    SCENARIO: 'ramp',
    STAGES: '20',
    DURATION: '1',
    ARGS: '--warmup 0 --only direct',
    BASELINE: 'artifact:bench-baseline',
    MAX_REGRESS: '100000',
  };
  const env = (github: { base: string }, workspace: string) => ({
    GITHUB_API_URL: github.base,
    GITHUB_REPOSITORY: 'octo/app',
    GITHUB_TOKEN: 'ghs_secret',
    GITHUB_EVENT_NAME: 'pull_request',
    GITHUB_EVENT_PATH: join(work, workspace, 'event.json'),
  });
  const event = (workspace: string) => {
    writeFileSync(join(workspace, 'event.json'), JSON.stringify({ pull_request: { number: 7 } }));
  };
  /** main's baseline artifact #2 (its zip: fastBaseline). */
  const mainArtifact = (api: string) => ({
    id: 2,
    name: 'bench-baseline',
    expired: false,
    workflow_run: { repository_id: OCTO_APP_ID, head_repository_id: OCTO_APP_ID, head_branch: 'main' },
    archive_download_url: `${api}/repos/octo/app/actions/artifacts/2/zip`,
  });

  it('a token without actions: read: exit 2, and the summary names the permission, no stack trace', async () => {
    const github = await fakeGitHub(() => [], {}, { denyArtifacts: true });
    try {
      const result = await runAction(
        'cmp-denied',
        { ...inputs, TARGET: `${target}/health` },
        event,
        env(github, 'cmp-denied'),
      );
      expect(result.code, result.stderr).toBe(2);
      expect(result.summary).toContain('permissions: actions: read');
      expect(result.stderr).toContain('permissions: actions: read');
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(result.outputs).toMatchObject({ passed: 'false', 'compare-exit-code': '2' });
    } finally {
      await github.close();
    }
  });

  it("someone else's comment carrying the marker is neither edited nor a reason to skip the comparison", async () => {
    const mallory = { login: 'mallory', type: 'User' };
    const github = await fakeGitHub(
      (api) => [mainArtifact(api)],
      { '2': zipArchive({ 'report.json': fastBaseline() }) },
      { comments: [{ id: 1, body: '<!-- tunnel2-bench-compare -->\nnothing to see', user: mallory }] },
    );
    try {
      for (const name of ['cmp-marker-1', 'cmp-marker-2']) {
        const result = await runAction(
          name,
          { ...inputs, TARGET: `${target}/health` },
          event,
          env(github, name),
        );
        expect(result.code, result.stderr).toBe(0);
        expect(result.stderr).not.toContain('could not comment');
      }
      // The first run tried the marked comment (a personal token's own would not be a Bot's), was
      // refused, and added its own; the second edited its own, first among the marked as a Bot's.
      const writes = github.calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.url}`);
      expect(writes).toEqual([
        'PATCH /repos/octo/app/issues/comments/1',
        'POST /repos/octo/app/issues/7/comments',
        'PATCH /repos/octo/app/issues/comments/101',
      ]);
      expect(github.comments[0]!.body).toBe('<!-- tunnel2-bench-compare -->\nnothing to see');
    } finally {
      await github.close();
    }
  });

  it('a comparison too long for a comment is cut where a table row ends, its <details> closed', async () => {
    const github = await fakeGitHub((api) => [mainArtifact(api)], {
      '2': zipArchive({ 'report.json': fastBaseline() }),
    });
    try {
      const name = 'cmp-long';
      const result = await runAction(
        name,
        { ...inputs, TARGET: `${target}/health`, BENCH: 'kit.js' },
        (workspace) => {
          event(workspace);
          // The kit, but its compare writes a comparison of 2,000 figures (a long ramp of h2 rows, say).
          writeFileSync(
            join(workspace, 'kit.js'),
            `const { spawnSync } = require('node:child_process');
const { mkdirSync, writeFileSync } = require('node:fs');
const args = process.argv.slice(2);
if (args[0] === 'compare') {
  const out = args[args.indexOf('--out') + 1];
  mkdirSync(out, { recursive: true });
  const NL = String.fromCharCode(10);
  const rows = Array.from({ length: 2000 }, (_, i) => '| stages[rate ' + i + ' req/s].tunnel.tunnelCpuPerRequestUs | 1 | 1 | ±0.0 % | ±5 % |  |');
  const md = ['# tunnel2 bench compare: ramp', '', '**No regression.**', '', '<details><summary>2000 figures</summary>', '', '| figure | base | head | change | noise |  |', '| --- | --- | --- | --- | --- | --- |', ...rows, '', '</details>', '', '_the rule_', ''];
  writeFileSync(out + '/compare.md', md.join(NL));
  process.exit(0);
}
const run = spawnSync(process.execPath, [${JSON.stringify(benchMain)}, ...args], { stdio: 'inherit' });
process.exit(run.status ?? 3);
`,
          );
        },
        env(github, name),
      );
      expect(result.code, result.stderr).toBe(0);
      const body = github.comments[1]!.body;
      expect(body.length).toBeLessThanOrEqual(65_536);
      expect(body.match(/<details>/g)?.length).toBe(body.match(/<\/details>/g)?.length);
      expect(body).toMatch(/\| {2}\|\n\n<\/details>\n\n… cut to fit a comment/);
    } finally {
      await github.close();
    }
  });

  it('two jobs of one workflow (a matrix: each its own artifact-name) keep a comment each', async () => {
    const github = await fakeGitHub((api) => [mainArtifact(api)], {
      '2': zipArchive({ 'report.json': fastBaseline() }),
    });
    try {
      for (const [name, job] of [
        ['cmp-job-a-1', 'bench-ramp'],
        ['cmp-job-b-1', 'bench-max'],
        ['cmp-job-a-2', 'bench-ramp'],
      ] as const) {
        const result = await runAction(
          name,
          { ...inputs, TARGET: `${target}/health`, ARTIFACT_NAME: job },
          event,
          env(github, name),
        );
        expect(result.code, result.stderr).toBe(0);
      }
      const writes = github.calls.filter((c) => c.method !== 'GET').map((c) => `${c.method} ${c.url}`);
      expect(writes).toEqual([
        'POST /repos/octo/app/issues/7/comments',
        'POST /repos/octo/app/issues/7/comments',
        'PATCH /repos/octo/app/issues/comments/101',
      ]);
      expect(github.comments.map((c) => c.body.split('\n')[0])).toEqual([
        'Looks good to me',
        '<!-- tunnel2-bench-compare bench-ramp -->',
        '<!-- tunnel2-bench-compare bench-max -->',
      ]);
    } finally {
      await github.close();
    }
  });
});

describe('finding actionlint', () => {
  const env = { HOME: '/home/u', PATH: '/usr/bin' };
  it('looks in the cache .ci/run builds it into', () => {
    const cached = '/home/u/.cache/tunnel2-ci/actionlint-v1.7.12/actionlint';
    expect(planActionlint(env, (file) => file === cached)).toEqual({ lint: cached });
  });
  it('fails with the install command when it is missing, or when ACTIONLINT names nothing', () => {
    const none = (): boolean => false;
    expect(planActionlint(env, none)).toMatchObject({
      fail: expect.stringContaining('go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12'),
    });
    expect(planActionlint({ ...env, ACTIONLINT: '/nowhere/actionlint' }, none)).toMatchObject({
      fail: expect.stringContaining('ACTIONLINT=/nowhere/actionlint does not exist'),
    });
  });
});

describe('actionlint', () => {
  const plan = planActionlint(process.env);
  const lint = async (args: string[]): Promise<string> => {
    if ('fail' in plan) throw new Error(plan.fail);
    try {
      await run(plan.lint, ['-no-color', ...args], { cwd: repoRoot });
      return '';
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      return `${e.stdout ?? ''}${e.stderr ?? ''}`;
    }
  };

  it('passes on .github/ (the workflows, and the local action they use)', async () => {
    expect(await lint([])).toBe('');
  });

  it('passes on the example workflow of docs/bench-action.md', async () => {
    const doc = readFileSync(join(repoRoot, 'docs', 'bench-action.md'), 'utf8');
    const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(0);
    const dir = join(work, 'example', '.github', 'workflows');
    mkdirSync(dir, { recursive: true });
    const files = blocks.map((block, i) => {
      const file = join(dir, `example-${i}.yml`);
      writeFileSync(file, block);
      return file;
    });
    expect(await lint(files)).toBe('');
  });
});
