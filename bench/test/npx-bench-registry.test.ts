// The published @tunnel2/bench, as people meet it: packed by scripts/pack-bench.ts (with @tunnel2/cli, its
// one dependency, packed by scripts/pack-cli.ts), both published to a real registry (verdaccio on loopback),
// then `npx @tunnel2/bench ramp --target <a plain node:http server>` from an empty folder and an empty npm
// cache: the kit starts the published CLI's edge and agent in front of the target and writes its reports.

import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type LocalRegistry,
  npmEnv,
  startLocalRegistry,
} from '../../packages/cli/test/support/local-registry.js';
import { type PackedBench, packBench } from '../../scripts/pack-bench.js';
import { packCli, readJson } from '../../scripts/pack-cli.js';
import type { BenchReport } from '../src/plan/report-schema.js';

const run = promisify(execFile);

let work: string;
let packed: PackedBench;
let registry: LocalRegistry;
let server: Server;
let target: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'tunnel2-npx-bench-'));
  await writeFile(join(work, 'empty-npmrc'), '');
  const cli = await packCli({ tarballDir: work });
  packed = await packBench({ tarballDir: work });
  registry = await startLocalRegistry();
  await registry.publish(cli.tarball);
  await registry.publish(packed.tarball);
  server = createServer((req, res) => {
    res.statusCode = req.url === '/health' ? 200 : 404;
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  target = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;
}, 120_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await registry?.close();
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

describe('the published @tunnel2/bench', () => {
  it('is one bundle (plus the test backend) depending on @tunnel2/cli of the same version only', async () => {
    expect(packed.files).toEqual([
      'LICENSE',
      'README.md',
      'THIRD-PARTY-NOTICES.md',
      'bin/check-node.js',
      'bin/tunnel2-bench.js',
      'dist/main.js',
      'dist/test-backend.js',
      'package.json',
    ]);
    const manifest = await readJson<Record<string, unknown>>(join(packed.dir, 'package.json'));
    expect(manifest).toMatchObject({
      name: '@tunnel2/bench',
      type: 'module',
      bin: { 'tunnel2-bench': './bin/tunnel2-bench.js' },
      dependencies: { '@tunnel2/cli': packed.version },
    });
    expect(manifest.private).toBeUndefined();
    expect(packed.bundled.some((id) => id.startsWith('autocannon@'))).toBe(true);
    // An unsupported Node gets one line, not a syntax or import error (the version faked before the bin runs).
    const oldNode = `data:text/javascript,Object.defineProperty(process,'versions',{value:{...process.versions,node:'20.11.0'}})`;
    const tooOld = await run(process.execPath, [
      '--import',
      oldNode,
      join(packed.dir, 'bin', 'tunnel2-bench.js'),
    ]).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(tooOld).toMatchObject({
      code: 1,
      stderr: '@tunnel2/bench requires Node.js >= 22.19 (this is v20.11.0)\n',
    });
    // The repository-only scenarios (Redis, HAProxy, ...) are not bundled, nor offered by --help.
    expect(packed.bundled.filter((id) => id.startsWith('ioredis@'))).toEqual([]);
    const { stdout: help } = await run(process.execPath, [join(packed.dir, 'dist', 'main.js'), '--help']);
    expect(help).toContain('ramp       fixed-rate stages');
    expect(help).not.toMatch(/^ {2}(bulk|sessions|cluster|wan|tcp|floor|npx) /m);
    // The README is for users: no repository runs, figures or optimization log.
    const readme = await readFile(join(packed.dir, 'README.md'), 'utf8');
    expect(readme).toContain('## Load-test your own service');
    expect(readme).toContain('## Reading the reports');
    expect(readme).not.toContain('## Optimization log');
    expect(readme).not.toContain('pnpm bench');
    expect(readme).not.toMatch(/\]\((\.\.\/|src\/|test\/)/);
  });

  it('runs `npx @tunnel2/bench ramp --target <url>` from an empty folder, both sides, reports written', async () => {
    const cwd = await mkdtemp(join(work, 'cwd-'));
    const flags = ['--yes', '--registry', registry.url, '--cache', join(work, 'npm-cache')];
    const args = [
      packed.name,
      'ramp',
      '--target',
      target,
      '--stages',
      '20',
      '--duration',
      '2',
      '--warmup',
      '0',
    ];
    const { stdout, stderr } = await run(
      'npx',
      [...flags, '--userconfig', join(work, 'empty-npmrc'), ...args],
      {
        cwd,
        env: npmEnv({ INIT_CWD: cwd }),
        timeout: 90_000,
      },
    ).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`npx failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });
    // Reports go under the folder the user ran in, not into npx's cache.
    const out = stdout.trim();
    expect(out.startsWith(join(cwd, 'bench-results', 'ramp-')), stderr).toBe(true);
    expect((await readdir(out)).sort()).toEqual(['report.html', 'report.json', 'report.md']);
    const report = JSON.parse(await readFile(join(out, 'report.json'), 'utf8')) as BenchReport;
    expect(report.command).toBe(
      `npx @tunnel2/bench ramp --target ${target} --stages 20 --duration 2 --warmup 0`,
    );
    expect(report.environment).toMatchObject({ tunnel2: packed.version, autocannon: '9.0.0' });
    expect(report.settings.targetUrl).toBe(target);
    const stage = report.stages[0]!;
    for (const side of [stage.direct!, stage.tunnel!]) {
      expect(side.requests).toBeGreaterThan(20);
      expect(side.ok).toBe(side.requests);
    }
    expect(stage.tunnel!.agent!.cpuMs).toBeGreaterThan(0);

    // `compare` is in the published bundle too: a run against itself, from the user's folder.
    const compared = await run(
      'npx',
      [
        ...flags,
        '--userconfig',
        join(work, 'empty-npmrc'),
        packed.name,
        'compare',
        out,
        join(out, 'report.json'),
      ],
      { cwd, env: npmEnv({ INIT_CWD: cwd }), timeout: 60_000 },
    ).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`npx compare failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });
    expect(compared.stdout).toContain('# tunnel2 bench compare: ramp');
    expect(compared.stdout).toContain('**No regression');
    expect(compared.stderr).toContain('No regression');
  }, 180_000);
});
