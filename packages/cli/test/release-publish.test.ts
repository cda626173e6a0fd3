// The release (.github/workflows/release.yml): the workflow is linted with actionlint and read for what it
// must do, and its publish steps (scripts/release-publish.ts, which the workflow runs) are run for real
// against a local registry (verdaccio on loopback): a --dry-run that uploads nothing, then the publish of
// both tarballs, then `npx @tunnel2/cli --version` and `npx @tunnel2/bench --help` from an empty folder
// outside the repository with an empty npm cache, as a user would after the release; a re-run skips what
// is published already. Needs the public npm registry only for what verdaccio proxies (nothing here).

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { planActionlint } from '../../../bench/test/support/actionlint.js';
import { repoRoot } from '../../../scripts/pack-cli.js';
import { versionProblems, workspaceVersions } from '../../../scripts/release-publish.js';
import { type LocalRegistry, npmEnv, startLocalRegistry } from './support/local-registry.js';

const run = promisify(execFile);
const WORKFLOW = join(repoRoot, '.github', 'workflows', 'release.yml');
const SCRIPT = join(repoRoot, 'scripts', 'release-publish.ts');

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, string>;
}
interface Workflow {
  env: Record<string, string>;
  on: { push: { tags: string[] }; workflow_dispatch: { inputs: Record<string, { type: string }> } };
  jobs: Record<string, { needs?: string; permissions?: Record<string, string>; steps: Step[] }>;
}

describe('versions', () => {
  it('every workspace package has the same version', async () => {
    expect(versionProblems(await workspaceVersions())).toEqual([]);
  });

  it('refuses a tag that is not v<version>, and packages whose versions differ', () => {
    const same = { '@tunnel2/cli': '1.2.3', '@tunnel2/bench': '1.2.3' };
    expect(versionProblems(same, 'v1.2.3')).toEqual([]);
    expect(versionProblems({ '@tunnel2/cli': '1.3.0-rc.1' }, 'v1.3.0-rc.1')).toEqual([]);
    expect(versionProblems(same, 'v1.2.4')).toEqual([
      'the tag "v1.2.4" does not match the packages\' version 1.2.3 (expected v1.2.3)',
    ]);
    expect(versionProblems(same, '1.2.3')[0]).toContain('expected v1.2.3');
    expect(versionProblems({ '@tunnel2/cli': '1.2.3', '@tunnel2/bench': '1.2.2' })).toEqual([
      'the workspace packages must share one version to be released together: @tunnel2/cli@1.2.3, @tunnel2/bench@1.2.2',
    ]);
  });

  it('--provenance without a repository to name exits 2 before packing', async () => {
    const env = npmEnv();
    delete env.GITHUB_REPOSITORY;
    const { version } = JSON.parse(await readFile(join(repoRoot, 'packages', 'cli', 'package.json'), 'utf8'));
    const args = [
      SCRIPT,
      '--no-build',
      '--provenance',
      '--tag',
      `v${version}`,
      '--registry',
      'http://127.0.0.1:9/',
    ];
    const refused = await run(process.execPath, args, { env }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(refused).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--provenance needs --repository <url>'),
    });
  });

  it('a publish without --tag (a manual run from a branch) exits 2 before packing: only a tag releases', async () => {
    // A registry where nothing listens: were the refusal gone, nothing could reach npm's.
    const out = await mkdtemp(join(tmpdir(), 'tunnel2-release-untagged-'));
    const args = [SCRIPT, '--no-build', '--out', out, '--registry', 'http://127.0.0.1:9/'];
    const refused = await run(process.execPath, args, { env: npmEnv() }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(refused).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('a publish needs --tag v<version>'),
    });
    expect(await readdir(out)).toEqual([]);
    await rm(out, { recursive: true, force: true });
  });

  it('the script exits 1 naming the mismatch', async () => {
    const { version } = JSON.parse(await readFile(join(repoRoot, 'packages', 'cli', 'package.json'), 'utf8'));
    const wrong = await run(process.execPath, [SCRIPT, '--check-only', '--tag', 'v999.0.0']).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(wrong).toMatchObject({
      code: 1,
      stderr: `release: the tag "v999.0.0" does not match the packages' version ${version} (expected v${version})\n`,
    });
    const { stdout } = await run(process.execPath, [SCRIPT, '--check-only', '--tag', `v${version}`]);
    expect(stdout).toBe(`release: version ${version} matches the tag v${version}\n`);
  });
});

describe('the release workflow', () => {
  it('passes actionlint', async () => {
    const plan = planActionlint(process.env);
    if ('fail' in plan) throw new Error(plan.fail);
    const lint = await run(plan.lint, ['-no-color', WORKFLOW], { cwd: repoRoot }).then(
      () => '',
      (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
    );
    expect(lint).toBe('');
  });

  it('on a v* tag: tests, then publishes with provenance through the script and pushes the image with an SBOM', async () => {
    const workflow = parse(await readFile(WORKFLOW, 'utf8')) as Workflow;
    expect(workflow.on.push.tags).toEqual(['v*']);
    expect(workflow.on.workflow_dispatch.inputs['dry-run']).toMatchObject({ type: 'boolean' });
    // Only a tag publishes and pushes: a manual run from a branch is a dry run whatever its input says
    // (else it would publish an untagged version and push :latest from a branch).
    expect(workflow.env.DRY_RUN).toContain("github.ref_type != 'tag'");
    const { test, npm, image } = workflow.jobs;
    // The full test command (the README's, after install) and the version check gate both publishing jobs.
    const runs = (steps: Step[]): string[] => steps.map((s) => s.run ?? '');
    expect(runs(test!.steps)).toContain('pnpm test');
    expect(runs(test!.steps).some((r) => r.startsWith('node scripts/release-publish.ts --check-only'))).toBe(
      true,
    );
    expect(npm!.needs).toBe('test');
    expect(image!.needs).toBe('test');
    expect(npm!.permissions).toMatchObject({ 'id-token': 'write', contents: 'read' });
    expect(image!.permissions).toMatchObject({ packages: 'write', contents: 'read' });
    // The npm job publishes with the script this file runs below, with --provenance.
    const publish = runs(npm!.steps).find((r) => r.includes('node scripts/release-publish.ts'));
    expect(publish).toContain('--provenance');
    const build = image!.steps.find((s) => s.uses?.startsWith('docker/build-push-action@'));
    expect(build?.with).toMatchObject({ file: 'docker/Dockerfile', sbom: true, provenance: 'mode=max' });
    // Every action is pinned to a version.
    for (const job of Object.values(workflow.jobs)) {
      for (const step of job.steps) if (step.uses) expect(step.uses).toMatch(/@v\d+$/);
    }
  });
});

describe('the publish steps against a local registry', () => {
  let work: string;
  let registry: LocalRegistry;
  let version: string;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tunnel2-release-'));
    registry = await startLocalRegistry();
    version = JSON.parse(await readFile(join(repoRoot, 'packages', 'cli', 'package.json'), 'utf8')).version;
  }, 60_000);

  afterAll(async () => {
    await registry?.close();
    if (work) await rm(work, { recursive: true, force: true });
  }, 60_000);

  /**
   * The script as the workflow runs it, with this registry instead of npm's and no provenance, in an
   * environment naming the repository as GitHub Actions does.
   */
  const release = async (...flags: string[]): Promise<string> => {
    const args = [SCRIPT, '--no-build', '--out', join(work, 'out'), '--tag', `v${version}`];
    args.push('--registry', registry.url, '--userconfig', registry.npmrc, ...flags);
    const { stdout } = await run(process.execPath, args, {
      cwd: repoRoot,
      env: npmEnv({ GITHUB_SERVER_URL: 'https://github.com', GITHUB_REPOSITORY: 'example/tunnel2' }),
      timeout: 240_000,
    }).catch(async (err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(
        `release failed: ${err.stdout ?? ''}${err.stderr ?? err.message}\n${await registry.log()}`,
      );
    });
    return stdout;
  };

  /** `npx --yes <args>` from a new empty folder outside the repository, an empty cache and npm config. */
  const npx = async (args: string[]): Promise<string> => {
    const cwd = await mkdtemp(join(work, 'user-'));
    const userconfig = join(cwd, '.npmrc-empty');
    await writeFile(userconfig, '');
    const flags = ['--yes', '--registry', registry.url, '--cache', join(cwd, 'npm-cache')];
    const { stdout } = await run('npx', [...flags, '--userconfig', userconfig, ...args], {
      cwd,
      env: npmEnv(),
      timeout: 120_000,
    });
    return stdout;
  };

  it('--dry-run packs both and publishes nothing', async () => {
    const out = await release('--dry-run');
    expect(out).toContain(`release: @tunnel2/cli@${version}: npm publish --dry-run passed`);
    expect(out).toContain(`release: @tunnel2/bench@${version}: npm publish --dry-run passed`);
    expect((await readdir(join(work, 'out'))).sort()).toEqual([
      `tunnel2-bench-${version}.tgz`,
      `tunnel2-cli-${version}.tgz`,
    ]);
    const res = await fetch(new URL('@tunnel2%2fcli', registry.url));
    expect(res.status).toBe(404);
  }, 300_000);

  it("before the first release: the README's tarball installs work without a registry", async () => {
    const out = join(work, 'out');
    const cli = join(out, `tunnel2-cli-${version}.tgz`);
    const bench = join(out, `tunnel2-bench-${version}.tgz`);
    const cwd = await mkdtemp(join(work, 'tarballs-'));
    const userconfig = join(cwd, '.npmrc-empty');
    await writeFile(userconfig, '');
    // --offline: nothing may be fetched (the README promises that neither tarball needs a registry).
    const npm = ['--offline', '--userconfig', userconfig, '--cache', join(cwd, 'npm-cache')];
    // `npm i -g ./tunnel2-cli-<v>.tgz`, into a prefix of its own, then `tunnel2` from its bin folder.
    const prefix = join(cwd, 'global');
    await run('npm', ['install', '-g', '--prefix', prefix, cli, ...npm], { cwd, env: npmEnv() });
    const { stdout: cliVersion } = await run(join(prefix, 'bin', 'tunnel2'), ['--version'], { cwd });
    expect(cliVersion.trim()).toBe(version);
    // The kit beside the CLI tarball, in a project folder, then `npx tunnel2-bench`.
    const project = join(cwd, 'project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), '{"private":true}');
    await run('npm', ['install', cli, bench, ...npm], { cwd: project, env: npmEnv() });
    const { stdout: help } = await run('npx', [...npm, 'tunnel2-bench', '--help'], {
      cwd: project,
      env: npmEnv(),
    });
    expect(help).toContain('ramp');
  }, 120_000);

  it('publishes the CLI and the bench kit; npx runs both from an empty folder outside the repository', async () => {
    const out = await release();
    expect(out).toContain(`release: published @tunnel2/cli@${version} to ${registry.url}`);
    expect(out).toContain(`release: published @tunnel2/bench@${version} to ${registry.url}`);
    expect((await npx(['@tunnel2/cli', '--version'])).trim()).toBe(version);
    const help = await npx(['@tunnel2/bench', '--help']);
    expect(help).toContain('ramp');
    // The repository npm checks provenance against: the one the workflow runs in.
    for (const [name, directory] of [
      ['@tunnel2/cli', 'packages/cli'],
      ['@tunnel2/bench', 'bench'],
    ] as const) {
      const res = await fetch(new URL(name.replace('/', '%2f'), registry.url));
      const doc = (await res.json()) as { versions: Record<string, { repository?: unknown }> };
      expect(doc.versions[version]?.repository).toEqual({
        type: 'git',
        url: 'git+https://github.com/example/tunnel2.git',
        directory,
      });
    }
  }, 300_000);

  it('a re-run skips what the registry has already', async () => {
    const out = await release();
    expect(out).toContain(`release: @tunnel2/cli@${version} is on ${registry.url} already: skipped`);
    expect(out).toContain(`release: @tunnel2/bench@${version} is on ${registry.url} already: skipped`);
  }, 300_000);
});
