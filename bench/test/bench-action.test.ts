import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
function runAction(name: string, inputs: Record<string, string>): Promise<ActionRun> {
  const workspace = join(work, name);
  mkdirSync(workspace);
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
    expect(result.summary).toContain('# tunnel2 bench: Ramp');
    expect(result.summary).toContain('| # | load | side | achieved RPS |');
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

  it('a failed preflight: exit 3, no report, the summary says to read the log', async () => {
    const result = await runAction('preflight', { ...load, TARGET: `${target}/missing` });
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('answered 404 on the direct side');
    expect(result.summary).toBe("The bench wrote no report (exit code 3): see the step's log.\n");
    expect(result.outputs).toEqual({ passed: 'false', 'exit-code': '3' });
  });
});

/** actionlint: ACTIONLINT, then PATH, then Go's bin folder (`go install github.com/rhysd/actionlint/cmd/actionlint@latest`). */
function findActionlint(): string | undefined {
  const candidates = [
    process.env.ACTIONLINT,
    ...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'actionlint')),
    join(process.env.GOPATH ?? join(homedir(), 'go'), 'bin', 'actionlint'),
  ];
  return candidates.find((file): file is string => file !== undefined && file !== '' && existsSync(file));
}

describe('actionlint', () => {
  const actionlint = findActionlint();
  const lint = async (args: string[]): Promise<string> => {
    if (actionlint === undefined) {
      throw new Error('actionlint not found: go install github.com/rhysd/actionlint/cmd/actionlint@latest');
    }
    try {
      await run(actionlint, ['-no-color', ...args], { cwd: repoRoot });
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
