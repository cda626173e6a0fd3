// Builds the publishable @tunnel2/bench into bench/publish/ and packs it into a tarball.
//
//   node scripts/pack-bench.ts [--no-build]
//
// builds the workspace with `tsc -b` (unless --no-build), writes bench/publish/ and
// bench/tunnel2-bench-<version>.tgz. Publish @tunnel2/cli first (scripts/pack-cli.ts), then
// `npm publish bench/tunnel2-bench-<version>.tgz`.
//
// `npx @tunnel2/bench ramp --target http://localhost:3000/health` must work from an empty folder. esbuild
// bundles the kit (autocannon, hdr-histogram-js and the rest) into dist/main.js, and the test backend into
// dist/test-backend.js, which the kit starts as a child when no --target is given. The one dependency is
// @tunnel2/cli at the same version: the kit starts `tunnel2 server` and `tunnel2 http` from its bin as
// child processes (each its own process, so their CPU and memory are measured apart), and the CLI package
// is self-contained already. runtime-paths.js is swapped for the published layout: reports go to
// ./bench-results under the folder the user runs in, not into npx's cache.

import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';

// Plain Node runs this file, so pack-cli is imported by its .ts path, typed here (as scripts/bench-npx.ts does).
type PackCliModule = typeof import('./pack-cli.js');
type PackedCli = import('./pack-cli.js').PackedCli;
type PackageJson = import('./pack-cli.js').PackageJson;
const { BUNDLE_OPTIONS, builtinsAsRequire, npmPack, readJson, repoRoot, repositoryField, writeNotices } =
  (await import(new URL('./pack-cli.ts', import.meta.url).href)) as PackCliModule;

const run = promisify(execFile);
const require = createRequire(import.meta.url);

export const benchDir = join(repoRoot, 'bench');
/** Where the publishable package is written (gitignored). */
export const benchPublishDir = join(benchDir, 'publish');
const BIN = 'bin/tunnel2-bench.js';
/** The CLI's Node.js version check, plain JS that old Node parses: one clear line instead of a syntax error. */
const CHECK_NODE = 'bin/check-node.js';
const BIN_SOURCE = `#!/usr/bin/env node
// Plain JS without top-level await, so that an unsupported Node reaches the version check (bin/check-node.js).
import { checkNodeVersion } from './check-node.js';

const problem = checkNodeVersion(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(problem.replace(/^tunnel2 /, '@tunnel2/bench ') + '\\n');
  process.exit(1);
}
import('../dist/main.js');
`;

/** The packed package: as pack-cli's, with @tunnel2/cli as its one dependency. */
export type PackedBench = PackedCli;

/** The published layout of bench/src/runtime-paths.ts (see there). */
function publishedRuntime(versions: Record<string, string>): string {
  return `import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
export const runtime = {
  command: 'npx @tunnel2/bench',
  standalone: false,
  cliBin: () => join(dirname(fileURLToPath(import.meta.resolve('@tunnel2/cli/package.json'))), 'bin', 'tunnel2.js'),
  testBackendBin: () => fileURLToPath(new URL('./test-backend.js', import.meta.url)),
  versions: ${JSON.stringify(versions)},
  resultsRoot: () => join(process.env.INIT_CWD ?? process.cwd(), 'bench-results'),
};
`;
}

function swapRuntime(contents: string): Plugin {
  return {
    name: 'published-runtime',
    setup(b) {
      b.onLoad({ filter: /[\\/]bench[\\/]dist[\\/]runtime-paths\.js$/ }, () => ({ contents, loader: 'js' }));
    },
  };
}

/**
 * The repository-only scenarios (bulk, sessions, cluster, ...: Redis, HAProxy, ioredis) stay out of the
 * bundle: main.js imports them only when runtime.standalone, which the published runtime turns off.
 */
const STANDALONE_STUB = `export async function runStandalone(name) {
  throw new Error(\`\${name} runs from the tunnel2 repository (pnpm bench \${name})\`);
}
`;

function stubStandalone(): Plugin {
  return {
    name: 'no-standalone-scenarios',
    setup(b) {
      b.onLoad({ filter: /[\\/]bench[\\/]dist[\\/]runs[\\/]standalone-scenarios\.js$/ }, () => ({
        contents: STANDALONE_STUB,
        loader: 'js',
      }));
    },
  };
}

/**
 * The package's README: bench/README.md for users (what the kit is, load-testing your own service,
 * reading the reports), without the repository's own runs, figures and optimization log.
 */
export function usersReadme(markdown: string): string {
  const end = markdown.indexOf('\n## Running it in this repository');
  if (end < 0) throw new Error('bench/README.md: no "## Running it in this repository" section to cut at');
  return `${markdown
    .slice(0, end)
    // The package holds none of the repository files the README links to: name them instead.
    .replace(/\[([^\]]+)\]\(\.\.\/([^)]+)\)/g, (_m, text: string, path: string) =>
      text === `\`${path}\`` || text === path
        ? `${text} (in the tunnel2 repository)`
        : `${text} (\`${path}\` in the tunnel2 repository)`,
    )
    .replace(
      /\[([^\]]+)\]\(((?:src|test)\/[^)]+)\)/g,
      (_m, text: string, path: string) => `${text} (\`bench/${path}\`)`,
    )
    .trimEnd()}\n`;
}

/** Builds bench/publish/ from the workspace build (run `tsc -b` first). */
export async function buildBenchPublishDir(options: { repository?: string | undefined } = {}): Promise<{
  source: PackageJson;
  bundled: string[];
  cli: string;
}> {
  const source = await readJson<PackageJson>(join(benchDir, 'package.json'));
  const cli = (await readJson<PackageJson>(join(repoRoot, 'packages', 'cli', 'package.json'))).version;
  const autocannon = (
    await readJson<PackageJson>(require.resolve('autocannon/package.json', { paths: [benchDir] }))
  ).version;
  await rm(benchPublishDir, { recursive: true, force: true });
  await mkdir(join(benchPublishDir, 'bin'), { recursive: true });
  const { metafile } = await build({
    absWorkingDir: repoRoot,
    entryPoints: {
      main: join(benchDir, 'dist', 'main.js'),
      'test-backend': join(repoRoot, 'packages', 'test-backend', 'dist', 'main.js'),
    },
    outdir: join(benchPublishDir, 'dist'),
    ...BUNDLE_OPTIONS,
    // The CLI is started as a program from its own package; optional native add-ons of ws stay out.
    external: ['@tunnel2/cli', 'bufferutil', 'utf-8-validate'],
    plugins: [swapRuntime(publishedRuntime({ autocannon })), stubStandalone(), builtinsAsRequire],
  });
  if (metafile === undefined) throw new Error('esbuild wrote no metafile');
  const bundled = await writeNotices(metafile, benchPublishDir);
  // The workspace manifest's identity, without its scripts, dev fields, workspace dependencies or `private`.
  const { name, version, description, license, engines } = source;
  const manifest = {
    ...{ name, version, description, license, type: 'module', engines },
    ...(options.repository === undefined ? {} : { repository: repositoryField(options.repository, 'bench') }),
    bin: { 'tunnel2-bench': `./${BIN}` },
    files: [BIN, CHECK_NODE, 'dist', 'THIRD-PARTY-NOTICES.md'],
    dependencies: { '@tunnel2/cli': cli },
    keywords: ['load-testing', 'benchmark', 'hdr-histogram', 'tunnel', 'autocannon'],
  };
  await writeFile(join(benchPublishDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await writeFile(join(benchPublishDir, BIN), BIN_SOURCE, { mode: 0o755 });
  await copyFile(join(repoRoot, 'packages', 'cli', CHECK_NODE), join(benchPublishDir, CHECK_NODE));
  const readme = await readFile(join(benchDir, 'README.md'), 'utf8');
  await writeFile(join(benchPublishDir, 'README.md'), usersReadme(readme));
  await copyFile(join(repoRoot, 'packages', 'cli', 'LICENSE'), join(benchPublishDir, 'LICENSE'));
  return { source, bundled, cli };
}

/** Builds the publish folder and packs it with `npm pack` into `tarballDir` (default: bench/); see packCli. */
export async function packBench(
  options: { tarballDir?: string; repository?: string | undefined } = {},
): Promise<PackedBench> {
  const { source, bundled, cli } = await buildBenchPublishDir(options);
  const packed = await npmPack(benchPublishDir, options.tarballDir ?? benchDir);
  const dependencies = { '@tunnel2/cli': cli };
  return {
    dir: benchPublishDir,
    name: source.name,
    version: source.version,
    dependencies,
    bundled,
    ...packed,
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv.includes('--no-build')) {
    await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-b'], { cwd: repoRoot });
  }
  const packed = await packBench();
  const tarball = relative(process.cwd(), packed.tarball);
  process.stdout.write(
    `${packed.name}@${packed.version}: ${tarball}\n` +
      `  tarball ${(packed.size / 1024).toFixed(1)} kB, ${packed.files.length} files, ` +
      `depends on @tunnel2/cli@${packed.dependencies['@tunnel2/cli']}\n` +
      `  bundled: ${packed.bundled.length} packages (THIRD-PARTY-NOTICES.md)\n` +
      `  publish @tunnel2/cli first, then: npm publish ${tarball}\n`,
  );
}
