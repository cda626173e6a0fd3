// Builds the publishable @tunnel2/cli into packages/cli/publish/ and packs it into a tarball.
//
//   node scripts/pack-cli.ts [--no-build] [--check]
//
// builds the workspace with `tsc -b` (unless --no-build), writes packages/cli/publish/ and
// packages/cli/tunnel2-cli-<version>.tgz, prints a summary and, with --check, runs publint and
// @arethetypeswrong/cli on the tarball. Publish with `npm publish packages/cli/tunnel2-cli-<version>.tgz`.
//
// The published package is self-contained: esbuild bundles the CLI with everything it imports, the
// unpublished workspace packages and the third-party ones alike, so `npx @tunnel2/cli` downloads one tarball
// and installs no dependency at all (measured: cold npx 3.3 s with 51 packages to install when the
// third-party packages were dependencies, 0.65 s bundled; see bench/README.md). Code splitting keeps the
// edge (fastify) in chunks that only `tunnel2 server` loads. The declarations are bundled by
// rollup-plugin-dts into one index.d.ts that imports nothing but `node:*` types. The workspace build (dist/
// from `tsc -b`) is the input and is left untouched.

import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type BuildOptions, build, type Metafile, type Plugin } from 'esbuild';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

export const repoRoot = fileURLToPath(new URL('..', import.meta.url));
export const cliDir = join(repoRoot, 'packages', 'cli');
/** Where the publishable package is written (gitignored). */
export const publishDir = join(cliDir, 'publish');

/** Packages that must never be on the agent path (`tunnel2 http`, `connect()`): only `tunnel2 server`. */
const SERVER_ONLY = ['/node_modules/fastify/', 'packages/edge/', 'packages/registry/'];
/**
 * The edge's error-page template (`@tunnel2/edge/error-page`), which the agent renders its backend errors
 * with: self-contained modules that import nothing else of the edge, allowed on the agent path.
 */
const AGENT_SHARED = /packages\/edge\/dist\/answers\/error-(page|format|html|facts)\.js$/;
/** Optional native add-ons of ws, loaded in a try/catch: left out, ws uses its JS fallbacks. */
const OPTIONAL_NATIVE = ['bufferutil', 'utf-8-validate'];
/** Files of the published package besides package.json, README.md and LICENSE. */
const FILES = [
  'bin/tunnel2.js',
  'bin/check-node.js',
  'bin/young-generation.js',
  'bin/optimizing-compiler.js',
  'bin/malloc-arenas.js',
  'dist',
  'static',
  'THIRD-PARTY-NOTICES.md',
  // The config file's JSON Schema, for editors (`# yaml-language-server: $schema=...`, docs/config-file.md).
  'tunnel2.schema.json',
];

// CommonJS code bundled into ESM calls `require` for Node built-ins and optional packages: give every chunk
// a real one.
export const REQUIRE_BANNER =
  "import { createRequire as __tunnel2CreateRequire } from 'node:module';\n" +
  'const require = __tunnel2CreateRequire(import.meta.url);';

// The public `logger` option is typed as pino's Logger in the sources; the published declarations must not
// need pino's types (pino is bundled, not a dependency), so `pino` resolves to this structural type, which a
// pino logger satisfies.
const LOGGER_TYPES = `/** How the agent logs, in pino's calling convention: a pino logger fits, as does any object of this shape. */
export interface Logger {
  fatal: LogFn;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  trace: LogFn;
  child(bindings: Record<string, unknown>): Logger;
}
/** \`log.warn({ err }, 'what failed')\` or \`log.info('message')\`. */
export interface LogFn {
  (obj: object, msg?: string, ...args: unknown[]): void;
  (msg: string, ...args: unknown[]): void;
}
`;

export interface PackageJson {
  name: string;
  version: string;
  description?: string;
  license?: string;
  engines?: Record<string, string>;
  keywords?: string[];
  dependencies?: Record<string, string>;
  bin?: Record<string, string>;
}

export interface PackedCli {
  /** The publish folder (packages/cli/publish). */
  dir: string;
  /** Absolute path of the packed tarball. */
  tarball: string;
  name: string;
  version: string;
  /** Runtime dependencies of the published package (none: everything is bundled). */
  dependencies: Record<string, string>;
  /** Third-party packages bundled in, as name@version. */
  bundled: string[];
  /** Tarball size and unpacked size in bytes, as `npm pack` reports them. */
  size: number;
  unpackedSize: number;
  /** Paths inside the package, sorted. */
  files: string[];
}

export async function readJson<T>(path: string): Promise<T> {
  return JSON.parse(await readFile(path, 'utf8')) as T;
}

/**
 * Node built-ins imported from ESM code are loaded with `require` instead: an ESM import of a built-in
 * builds a facade that reads every export, and node:http's lazy getters then load Node's own undici and
 * web streams (about 20 ms of a 130 ms start).
 */
export const builtinsAsRequire: Plugin = {
  name: 'builtins-as-require',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) =>
      args.kind === 'import-statement' ? { path: args.path, namespace: 'builtin' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

// Plain Node runs this file and strips the types of the rewrites' source (a file that imports nothing), so the
// pack needs no build of the CLI for them: the edge's image copies that one file (docker/Dockerfile).
type LazyBuiltinsModule = typeof import('../packages/cli/src/lazy-builtins.js');

/**
 * Dependencies that `require` built-ins an idle agent never uses when they load (ws: node:https, node:tls,
 * node:zlib; undici: node:http2, and node:tls with it; commander: node:child_process): in the bundle each becomes a proxy that loads the built-in on first use, so an
 * agent on ws:// never loads them (packages/cli/src/lazy-builtins.ts; bench/README.md, "Issue #34: the
 * workspace agent's idle memory"). The workspace CLI does the same with a load hook
 * (src/lazy-builtins-hook.ts), which the bundle does not need: it gets an empty one. A dependency release
 * without the expected lines fails the pack instead of silently bundling the eager requires.
 */
export const lazyBuiltins: Plugin = {
  name: 'lazy-builtins',
  async setup(b) {
    const { hasLazyBuiltins, rewriteLazyBuiltins } = (await import(
      new URL('../packages/cli/src/lazy-builtins.ts', import.meta.url).href
    )) as LazyBuiltinsModule;
    b.onLoad({ filter: /[\\/]node_modules[\\/].*\.js$/ }, async (args) => {
      if (!hasLazyBuiltins(args.path)) return undefined;
      return { contents: rewriteLazyBuiltins(args.path, await readFile(args.path, 'utf8')), loader: 'js' };
    });
    b.onLoad({ filter: /[\\/]packages[\\/]cli[\\/]dist[\\/]lazy-builtins-hook\.js$/ }, () => ({
      contents: 'export function installLazyBuiltins() {}',
      loader: 'js',
    }));
  },
};

/** How every published bundle is built: ESM for Node 22, a real `require` in each chunk, a metafile. */
export const BUNDLE_OPTIONS = {
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  banner: { js: REQUIRE_BANNER },
  minifySyntax: true,
  minifyWhitespace: true,
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
} as const satisfies BuildOptions;

/**
 * A whole program bundled with its chunks (the CLI, the edge's image): code only some runs need (the edge in
 * the CLI, the Redis registry) stays in chunks loaded on first use, which sit next to the entries so that
 * `../package.json` resolves from all of them; built-ins load with `require`, and those the dependencies load
 * eagerly but an idle agent never uses (TLS, HTTP/2) on first use.
 */
export const PROGRAM_BUNDLE_OPTIONS = {
  ...BUNDLE_OPTIONS,
  chunkNames: '[name]-[hash]',
  splitting: true,
  external: OPTIONAL_NATIVE,
  plugins: [builtinsAsRequire, lazyBuiltins],
} as const satisfies BuildOptions;

/** The modules an output file loads before its code runs (static imports, followed through chunks). */
function staticallyLoaded(metafile: Metafile, output: string): Set<string> {
  const seen = new Set<string>([output]);
  const walk = (file: string): void => {
    for (const imported of metafile.outputs[file]?.imports ?? []) {
      if (imported.kind !== 'import-statement' || seen.has(imported.path)) continue;
      seen.add(imported.path);
      if (!imported.external) walk(imported.path);
    }
  };
  walk(output);
  const inputs = new Set<string>();
  for (const file of seen) {
    for (const input of Object.keys(metafile.outputs[file]?.inputs ?? {})) inputs.add(input);
  }
  return inputs;
}

/** The folder of the npm package a metafile input belongs to, or undefined for repository code. */
function packageRoot(input: string): string | undefined {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return undefined;
  const rest = input.slice(at + 'node_modules/'.length).split('/');
  const depth = rest[0]?.startsWith('@') ? 2 : 1;
  return join(repoRoot, input.slice(0, at), 'node_modules', ...rest.slice(0, depth));
}

async function bundleJs(): Promise<Metafile> {
  const dist = join(cliDir, 'dist');
  const outdir = join(publishDir, 'dist');
  const { metafile } = await build({
    absWorkingDir: repoRoot,
    entryPoints: { main: join(dist, 'main.js'), index: join(dist, 'index.js') },
    outdir,
    ...PROGRAM_BUNDLE_OPTIONS,
  });
  if (metafile === undefined) throw new Error('esbuild wrote no metafile');
  // The agent path must not load the edge: main.js (the CLI) and index.js (connect()) statically reach
  // neither fastify nor the edge's code, which only `tunnel2 server` imports dynamically. The command line's
  // chunk (cli-program) and the http command's are checked as well.
  const entries = Object.keys(metafile.outputs).filter((file) =>
    /\/(main|index|cli-program-[A-Z0-9]+|http-command-[A-Z0-9]+)\.js$/.test(file),
  );
  for (const output of entries) {
    const leaked = [...staticallyLoaded(metafile, output)].filter(
      (input) => SERVER_ONLY.some((pattern) => input.includes(pattern)) && !AGENT_SHARED.test(input),
    );
    if (leaked.length > 0) throw new Error(`${output} statically loads ${leaked.slice(0, 3).join(', ')}`);
  }
  return metafile;
}

/**
 * The license text of a package that ships no license file. MIT asks for its notice to go with the code, so a
 * package that declares MIT gets the standard text with its author as the holder; any other gets a pointer.
 */
function withoutLicenseFile(license: string | undefined, author: string | undefined): string {
  if (license !== 'MIT') return `(the package ships no license file; it declares ${license ?? 'no license'})`;
  return `(the package ships no license file; it declares MIT, whose standard text follows)

Copyright (c) ${author ?? 'the package authors'}

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
documentation files (the "Software"), to deal in the Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and
to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of
the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT,
TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.`;
}

/** THIRD-PARTY-NOTICES.md in `dir`: name, version, license and license text of every bundled package. */
export async function writeNotices(metafile: Metafile, dir: string = publishDir): Promise<string[]> {
  const roots = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const root = packageRoot(input);
    if (root !== undefined) roots.add(root);
  }
  const sections: { id: string; text: string }[] = [];
  for (const root of roots) {
    const json = await readJson<PackageJson & { author?: string | { name?: string } }>(
      join(root, 'package.json'),
    );
    const licenseFile = (await readdir(root)).find((file) => /^licen[cs]e(\.|$)/i.test(file));
    const text = licenseFile
      ? (await readFile(join(root, licenseFile), 'utf8')).trim()
      : withoutLicenseFile(json.license, typeof json.author === 'string' ? json.author : json.author?.name);
    const id = `${json.name}@${json.version}`;
    sections.push({
      id,
      text: `## ${id}\n\nLicense: ${json.license ?? 'unknown'}\n\n\`\`\`\n${text}\n\`\`\`\n`,
    });
  }
  sections.sort((a, b) => a.id.localeCompare(b.id));
  await writeFile(
    join(dir, 'THIRD-PARTY-NOTICES.md'),
    `# Third-party notices\n\nThe files in dist/ include code from these packages.\n\n${sections.map((s) => s.text).join('\n')}`,
  );
  return sections.map((s) => s.id);
}

/** dist/index.d.ts: the public declarations, with the workspace packages' types inlined. */
async function bundleTypes(): Promise<void> {
  const { rollup } = await import('rollup');
  const { dts } = await import('rollup-plugin-dts');
  const scratch = await mkdtemp(join(tmpdir(), 'tunnel2-pack-'));
  try {
    const loggerTypes = join(scratch, 'logger.d.ts');
    await writeFile(loggerTypes, LOGGER_TYPES);
    const inline = (id: string): boolean => id === 'pino' || id.startsWith('@tunnel2/');
    const bundle = await rollup({
      input: join(cliDir, 'dist', 'index.d.ts'),
      plugins: [
        { name: 'logger-types', resolveId: (id) => (id === 'pino' ? loggerTypes : null) },
        dts({
          includeExternal: ['@tunnel2/protocol', '@tunnel2/edge', '@tunnel2/registry'],
        }),
      ],
      external: (id) => /^(node:|[a-z@])/.test(id) && !inline(id),
      onwarn(warning, warn) {
        if (warning.code === 'UNRESOLVED_IMPORT') throw new Error(`index.d.ts: ${warning.message}`);
        warn(warning);
      },
    });
    await bundle.write({ file: join(publishDir, 'dist', 'index.d.ts'), format: 'es' });
    await bundle.close();
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  // Consumers need @types/node and nothing else.
  const text = await readFile(join(publishDir, 'dist', 'index.d.ts'), 'utf8');
  const imports = [...text.matchAll(/\bfrom\s+['"]([^'"]+)['"]/g)].map((m) => m[1] ?? '');
  const foreign = imports.filter((id) => !id.startsWith('node:'));
  if (foreign.length > 0) throw new Error(`index.d.ts imports ${foreign.join(', ')}: only node:* may remain`);
}

/**
 * `repository` of a published manifest: npm checks it against the repository a provenance statement names
 * (`npm publish --provenance` fails when they differ), so the release passes the one it runs in.
 */
export function repositoryField(url: string, directory: string): Record<string, string> {
  return { type: 'git', url: `git+${url.replace(/\.git$/, '')}.git`, directory };
}

/** package.json of the published package: the workspace one without dependencies, scripts or dev fields. */
function publishManifest(source: PackageJson, repository?: string): Record<string, unknown> {
  return {
    name: source.name,
    version: source.version,
    description: source.description,
    license: source.license,
    ...(repository === undefined ? {} : { repository: repositoryField(repository, 'packages/cli') }),
    type: 'module',
    engines: source.engines,
    bin: source.bin,
    main: './dist/index.js',
    types: './dist/index.d.ts',
    exports: {
      '.': { types: './dist/index.d.ts', default: './dist/index.js' },
      './package.json': './package.json',
      './tunnel2.schema.json': './tunnel2.schema.json',
    },
    files: FILES,
    keywords: source.keywords,
  };
}

/** Builds packages/cli/publish/ from the workspace build (run `tsc -b` first). */
export async function buildPublishDir(
  options: { repository?: string | undefined } = {},
): Promise<{ source: PackageJson; bundled: string[] }> {
  const source = await readJson<PackageJson>(join(cliDir, 'package.json'));
  await rm(publishDir, { recursive: true, force: true });
  await mkdir(join(publishDir, 'bin'), { recursive: true });
  const metafile = await bundleJs();
  const bundled = await writeNotices(metafile);
  await bundleTypes();
  await writeFile(
    join(publishDir, 'package.json'),
    `${JSON.stringify(publishManifest(source, options.repository), null, 2)}\n`,
  );
  for (const file of [
    'bin/tunnel2.js',
    'bin/check-node.js',
    'bin/young-generation.js',
    'bin/optimizing-compiler.js',
    'bin/malloc-arenas.js',
    'README.md',
    'LICENSE',
    'tunnel2.schema.json',
  ]) {
    await copyFile(join(cliDir, file), join(publishDir, file));
  }
  // The inspector's page: its code finds it at `../static/` from the bundled chunk in dist/.
  await cp(join(repoRoot, 'packages', 'inspector', 'static'), join(publishDir, 'static'), {
    recursive: true,
  });
  return { source, bundled };
}

/** `npm pack` of a publish folder into `tarballDir`: the tarball's path, sizes and files. */
export async function npmPack(
  dir: string,
  tarballDir: string,
): Promise<Pick<PackedCli, 'tarball' | 'size' | 'unpackedSize' | 'files'>> {
  await mkdir(tarballDir, { recursive: true });
  // Without the npm_* variables a parent pnpm or npm set (they would configure this npm too).
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', tarballDir], {
    cwd: dir,
    env,
  });
  const [report] = JSON.parse(stdout) as {
    filename: string;
    size: number;
    unpackedSize: number;
    files: { path: string }[];
  }[];
  if (!report) throw new Error(`npm pack printed no report: ${stdout}`);
  return {
    tarball: join(tarballDir, report.filename),
    size: report.size,
    unpackedSize: report.unpackedSize,
    files: report.files.map((f) => f.path).sort(),
  };
}

/**
 * Builds the publish folder and packs it with `npm pack` into `tarballDir` (default: packages/cli), with
 * `repository` (a https URL of the repository) in the manifest when given.
 */
export async function packCli(
  options: { tarballDir?: string; repository?: string | undefined } = {},
): Promise<PackedCli> {
  const { source, bundled } = await buildPublishDir(options);
  const packed = await npmPack(publishDir, options.tarballDir ?? cliDir);
  return {
    dir: publishDir,
    name: source.name,
    version: source.version,
    dependencies: {},
    bundled,
    ...packed,
  };
}

/** publint and @arethetypeswrong/cli (ESM-only profile) on the packed tarball; returns their complaints. */
export async function lintPackage(packed: PackedCli): Promise<string[]> {
  const problems: string[] = [];
  const { publint } = await import('publint');
  const { formatMessage } = await import('publint/utils');
  const pkg = await readJson<Record<string, unknown>>(join(packed.dir, 'package.json'));
  const { messages } = await publint({ pkgDir: packed.dir, level: 'suggestion', strict: true, pack: 'npm' });
  for (const message of messages) problems.push(`publint: ${formatMessage(message, pkg) ?? message.code}`);
  const attw = join(dirname(require.resolve('@arethetypeswrong/cli/package.json')), 'dist', 'index.js');
  try {
    await run(process.execPath, [attw, packed.tarball, '--profile', 'esm-only', '--format', 'ascii'], {
      env: { ...process.env, NO_COLOR: '1' },
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    problems.push(`attw: ${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (!args.includes('--no-build')) {
    await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-b'], { cwd: repoRoot });
  }
  const packed = await packCli();
  const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} kB`;
  const tarball = relative(process.cwd(), packed.tarball);
  process.stdout.write(
    `${packed.name}@${packed.version}: ${tarball}\n` +
      `  tarball ${kb(packed.size)}, unpacked ${kb(packed.unpackedSize)}, ${packed.files.length} files, no dependencies\n` +
      `  bundled: ${packed.bundled.length} packages (THIRD-PARTY-NOTICES.md)\n` +
      // A release is a tag (README, Releasing): npm publish by hand would skip the tests, the provenance and
      // the repository field the workflow gives it.
      `  install it anywhere: npm i -g ${tarball.startsWith('/') ? tarball : `./${tarball}`}\n` +
      `  release it: push the tag v${packed.version} (.github/workflows/release.yml)\n`,
  );
  if (args.includes('--check')) {
    const problems = await lintPackage(packed);
    for (const problem of problems) process.stderr.write(`${problem}\n`);
    if (problems.length > 0) process.exitCode = 1;
    else process.stdout.write('  publint and attw: no problems\n');
  }
}
