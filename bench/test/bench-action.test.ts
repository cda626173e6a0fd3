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
