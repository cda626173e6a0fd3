// The release's publish steps, run by .github/workflows/release.yml and, against a local registry, by
// packages/cli/test/release-publish.test.ts, so that what the test proves is what the workflow runs:
//
//   node scripts/release-publish.ts [--tag v1.2.3] [--check-only] [--no-build] [--out <dir>]
//                                   [--registry <url>] [--userconfig <npmrc>] [--provenance] [--dry-run]
//                                   [--repository <https url>]
//
// 1. Versions: every workspace package has the same version, and with --tag (the pushed tag) the tag is
//    `v<that version>`. --check-only stops here. A publish needs --tag: only a tag releases (--dry-run
//    does without).
// 2. Builds the workspace (`tsc -b`, unless --no-build) and packs @tunnel2/cli and @tunnel2/bench with
//    scripts/pack-cli.ts and scripts/pack-bench.ts (the tarballs go to --out, default release/), with
//    `repository` set to --repository (default, in GitHub Actions: the repository the workflow runs in), which
//    npm requires to match the provenance statement's.
// 3. `npm publish <tarball> --access public` of the CLI, then of the bench kit (it depends on the CLI at
//    the same version), to --registry (default: npm's own), with --provenance (signed by the workflow's
//    OIDC token; only GitHub Actions and a few other CI providers can) and --dry-run (npm checks and
//    prints, uploads nothing). A version the registry has already is skipped, so a re-run after a failed
//    second publish completes the release instead of failing on the first.

import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

// Plain Node runs this file, so the pack scripts are imported by their .ts paths, typed here (as
// scripts/pack-bench.ts does).
type PackCliModule = typeof import('./pack-cli.js');
type PackBenchModule = typeof import('./pack-bench.js');
type PackageJson = import('./pack-cli.js').PackageJson;
const { packCli, readJson, repoRoot } = (await import(
  new URL('./pack-cli.ts', import.meta.url).href
)) as PackCliModule;
const { packBench } = (await import(new URL('./pack-bench.ts', import.meta.url).href)) as PackBenchModule;

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** npm's registry, where a release goes unless --registry says otherwise. */
export const NPM_REGISTRY = 'https://registry.npmjs.org/';

/** The version of every workspace package (packages/*, bench), by package name. */
export async function workspaceVersions(root: string = repoRoot): Promise<Record<string, string>> {
  const dirs = (await readdir(join(root, 'packages'), { withFileTypes: true }))
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(root, 'packages', entry.name));
  const versions: Record<string, string> = {};
  for (const dir of [...dirs, join(root, 'bench')]) {
    const manifest = await readJson<PackageJson>(join(dir, 'package.json'));
    versions[manifest.name] = manifest.version;
  }
  return versions;
}

/**
 * What is wrong with releasing these versions under this tag: one line per problem, none when every
 * package has the same version and the tag (if any) is `v<version>`.
 */
export function versionProblems(versions: Record<string, string>, tag?: string): string[] {
  const distinct = [...new Set(Object.values(versions))];
  if (distinct.length === 0) return ['no workspace packages found'];
  if (distinct.length > 1) {
    const list = Object.entries(versions)
      .map(([name, version]) => `${name}@${version}`)
      .join(', ');
    return [`the workspace packages must share one version to be released together: ${list}`];
  }
  const version = distinct[0]!;
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) return [`"${version}" is not a semver version`];
  if (tag !== undefined && tag !== `v${version}`) {
    return [`the tag "${tag}" does not match the packages' version ${version} (expected v${version})`];
  }
  return [];
}

export interface PublishOptions {
  registry: string;
  userconfig?: string | undefined;
  provenance: boolean;
  dryRun: boolean;
  /** Environment of the npm children (default: ours without the npm_* variables a parent pnpm set). */
  env?: NodeJS.ProcessEnv;
}

function npmChildEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
}

/** True when the registry has `name@version` already (npm view prints it); false on its 404. */
async function isPublished(name: string, version: string, options: PublishOptions): Promise<boolean> {
  const args = ['view', `${name}@${version}`, 'version', '--registry', options.registry];
  if (options.userconfig !== undefined) args.push('--userconfig', options.userconfig);
  try {
    const { stdout } = await run('npm', args, { env: options.env ?? npmChildEnv() });
    return stdout.trim() === version;
  } catch (err) {
    const e = err as { stderr?: string };
    if (/E404|404 Not Found|is not in this registry/.test(e.stderr ?? '')) return false;
    throw err;
  }
}

/** `npm publish <tarball> --access public [--provenance] [--dry-run]`; 'skipped' if that version is there. */
export async function publishTarball(
  tarball: string,
  name: string,
  version: string,
  options: PublishOptions,
): Promise<'published' | 'skipped' | 'dry-run'> {
  if (await isPublished(name, version, options)) return 'skipped';
  const args = ['publish', tarball, '--access', 'public', '--registry', options.registry];
  if (options.userconfig !== undefined) args.push('--userconfig', options.userconfig);
  if (options.provenance) args.push('--provenance');
  if (options.dryRun) args.push('--dry-run');
  // A prerelease (1.2.0-rc.1) must not become `latest`.
  args.push('--tag', version.includes('-') ? 'next' : 'latest');
  try {
    await run('npm', args, { env: options.env ?? npmChildEnv(), maxBuffer: 16 << 20 });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`npm publish ${tarball} failed: ${e.stderr ?? e.message}`);
  }
  return options.dryRun ? 'dry-run' : 'published';
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      tag: { type: 'string' },
      'check-only': { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
      out: { type: 'string', default: join(repoRoot, 'release') },
      registry: { type: 'string', default: NPM_REGISTRY },
      userconfig: { type: 'string' },
      provenance: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
      repository: { type: 'string' },
    },
    strict: true,
  });
  const say = (line: string): boolean => process.stdout.write(`release: ${line}\n`);
  const versions = await workspaceVersions();
  const problems = versionProblems(versions, values.tag);
  for (const problem of problems) process.stderr.write(`release: ${problem}\n`);
  if (problems.length > 0) return 1;
  const version = Object.values(versions)[0]!;
  say(`version ${version}${values.tag === undefined ? '' : ` matches the tag ${values.tag}`}`);
  if (values['check-only']) return 0;
  if (values.tag === undefined && !values['dry-run']) {
    // Only a pushed tag releases: a manual run from a branch would publish a version no tag names.
    process.stderr.write(
      'release: a publish needs --tag v<version> (the pushed tag); --dry-run without one\n',
    );
    return 2;
  }

  if (!values['no-build']) {
    say('building the workspace (tsc -b)');
    await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-b'], { cwd: repoRoot });
  }
  const out = resolve(values.out);
  const { GITHUB_SERVER_URL: server, GITHUB_REPOSITORY: repo } = process.env;
  const repository = values.repository ?? (server && repo ? `${server}/${repo}` : undefined);
  if (values.provenance && repository === undefined) {
    process.stderr.write('release: --provenance needs --repository <url> (GitHub Actions sets it)\n');
    return 2;
  }
  const cli = await packCli({ tarballDir: out, repository });
  say(`packed ${cli.name}@${cli.version}: ${relative(process.cwd(), cli.tarball)}`);
  const bench = await packBench({ tarballDir: out, repository });
  say(`packed ${bench.name}@${bench.version}: ${relative(process.cwd(), bench.tarball)}`);

  const options: PublishOptions = {
    registry: values.registry,
    userconfig: values.userconfig,
    provenance: values.provenance,
    dryRun: values['dry-run'],
  };
  // The CLI first: the bench kit depends on it at this version.
  for (const packed of [cli, bench]) {
    const outcome = await publishTarball(packed.tarball, packed.name, packed.version, options);
    const where = options.registry;
    if (outcome === 'skipped') say(`${packed.name}@${packed.version} is on ${where} already: skipped`);
    else if (outcome === 'dry-run') say(`${packed.name}@${packed.version}: npm publish --dry-run passed`);
    else say(`published ${packed.name}@${packed.version} to ${where}`);
  }
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = await main().catch((err: Error) => {
    process.stderr.write(`release: ${err.message}\n`);
    return 1;
  });
}
