// `pnpm install` in a fresh clone, as a new contributor runs it: it must end without pnpm 10's "Ignored
// build scripts" warning, so every dependency whose install script we need is allowed by name
// (package.json `pnpm.onlyBuiltDependencies`) and no other dependency has one. The clone is the working
// tree's tracked files (uncommitted edits included); the packages come from the machine's pnpm store, which
// the repository's own install filled.

import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { findCommand } from '@tunnel2/test-services';
import { afterAll, expect, it } from 'vitest';
import { repoRoot } from '../../../scripts/pack-cli.js';

const run = promisify(execFile);
let work: string | undefined;

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** The pnpm running this test (`pnpm test` sets npm_execpath), else the one on PATH. */
function pnpmCommand(): { file: string; args: string[] } {
  const execpath = process.env.npm_execpath;
  if (execpath !== undefined && /pnpm\.c?js$/.test(execpath))
    return { file: process.execPath, args: [execpath] };
  return { file: 'pnpm', args: [] };
}

/** Our environment without the npm_* settings the parent pnpm set (its log level would hide warnings). */
function pnpmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { CI: '1' };
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^(npm|pnpm)_config_/i.test(key)) env[key] = value;
  }
  return env;
}

it('pnpm install in a fresh clone prints no "Ignored build scripts" warning', async () => {
  work = await mkdtemp(join(tmpdir(), 'tunnel2-fresh-clone-'));
  const clone = join(work, 'tunnel2');
  const { stdout: tracked } = await run(findCommand('git', 'git'), ['ls-files', '-z'], {
    cwd: repoRoot,
    maxBuffer: 8 << 20,
  });
  for (const file of tracked.split('\0').filter((f) => f !== '')) {
    await mkdir(dirname(join(clone, file)), { recursive: true });
    await copyFile(join(repoRoot, file), join(clone, file)).catch((err: NodeJS.ErrnoException) => {
      // A file deleted in the working tree but not yet in the index.
      if (err.code !== 'ENOENT') throw err;
    });
  }
  // The root's `prepare` (the whole workspace's build, a minute here) is the test command's typecheck
  // already: left out here, it is not a dependency's build script and not what the warning is about.
  const manifestPath = join(clone, 'package.json');
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as { scripts: Record<string, string> };
  delete manifest.scripts.prepare;
  await writeFile(manifestPath, JSON.stringify(manifest, null, 2));

  const pnpm = pnpmCommand();
  const { stdout, stderr } = await run(
    pnpm.file,
    [...pnpm.args, 'install', '--frozen-lockfile', '--prefer-offline', '--reporter', 'append-only'],
    { cwd: clone, env: pnpmEnv(), maxBuffer: 16 << 20, timeout: 240_000 },
  ).catch((err: Error & { stdout?: string; stderr?: string }) => {
    throw new Error(`pnpm install failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
  });
  const output = `${stdout}${stderr}`;
  expect(output).not.toMatch(/Ignored build scripts/i);
  expect(output).not.toMatch(/approve-builds/);
  // pnpm records what it skipped in node_modules/.modules.yaml: nothing.
  // (pnpm 10 writes that YAML file in its JSON form).
  const modules = JSON.parse(await readFile(join(clone, 'node_modules', '.modules.yaml'), 'utf8')) as {
    ignoredBuilds?: string[];
  };
  expect(modules.ignoredBuilds ?? []).toEqual([]);
}, 300_000);
