// The `npx` start-up bench: how long `npx @tunnel2/cli http <port>` takes to its `ready` event on a machine
// that has never seen the package (cold: empty npm cache, empty folder) and on one that has (warm: the
// package already in npx's cache), plus the published package's size and dependency count.
//
//   node scripts/bench-npx.ts [--runs 5] [--json]
//
// It builds and packs the package (scripts/pack-cli.ts), publishes it to a verdaccio on loopback (its uplink
// is the public npm registry, for whatever the package depends on), and runs an edge and a backend in this
// process. One priming run first fills verdaccio's own cache, so that the cold runs measure the client
// against a registry that answers from its cache, as the public registry's CDN does. Progress goes to
// stderr, the results (a markdown table, or JSON with --json) to stdout.

import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs, promisify } from 'node:util';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';

// Plain Node runs this file, so the repository's TS modules are imported by their .ts path, typed here.
type PackCliModule = typeof import('./pack-cli.js');
type RegistryModule = typeof import('../packages/cli/test/support/local-registry.js');
const { packCli, repoRoot } = (await import(new URL('./pack-cli.ts', import.meta.url).href)) as PackCliModule;
const { npmEnv, startLocalRegistry, startNpx } = (await import(
  new URL('../packages/cli/test/support/local-registry.ts', import.meta.url).href
)) as RegistryModule;

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const { values: flags } = parseArgs({
  options: { runs: { type: 'string', default: '5' }, json: { type: 'boolean', default: false } },
});
const runs = Number(flags.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs ${flags.runs}: a positive integer`);

const log = (line: string): void => void process.stderr.write(`${line}\n`);
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return Math.round(sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2);
}
async function repeat(label: string, measure: (i: number) => Promise<number>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await measure(i));
  log(`  ${label}: ${times.map((t) => Math.round(t)).join(', ')} ms`);
  return median(times);
}

await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-b'], { cwd: repoRoot });
const work = await mkdtemp(join(tmpdir(), 'tunnel2-bench-npx-'));
const packed = await packCli({ tarballDir: work });
const registry = await startLocalRegistry();
const backend = await createTestBackend();
const edge = buildEdge({ port: 0, logger: pino({ level: 'warn' }) });
const { url: edgeUrl } = await edge.listen();
const httpArgs = ['http', String(backend.port), '--server', edgeUrl, '--json'];
const userconfig = join(work, 'empty-npmrc');
let folders = 0;

/** A new empty folder to run npx in. */
async function emptyFolder(): Promise<string> {
  const dir = join(work, `cwd-${++folders}`);
  await mkdir(dir);
  return dir;
}

/** `npx <package> http <backend>` to its ready event, in ms; with `check`, a request goes through too. */
async function npxToReady(cache: string, check = false): Promise<number> {
  const cwd = await emptyFolder();
  const started = performance.now();
  const npx = startNpx({ registry: registry.url, cache, userconfig, cwd, args: [packed.name, ...httpArgs] });
  try {
    const ready = await npx.waitFor('ready', 120_000);
    const ms = performance.now() - started;
    if (check) {
      const res = await fetch(`${edgeUrl}/session/${String(ready.name)}/loadtest/ping`);
      if (res.status !== 200) throw new Error(`a request through the tunnel answered ${res.status}`);
    }
    return ms;
  } finally {
    await npx.stop();
  }
}

/** `npx <package> --version` to its exit, in ms: npm's own share of a warm start. */
async function npxVersion(cache: string): Promise<number> {
  const cwd = await emptyFolder();
  const started = performance.now();
  const npmFlags = ['--yes', '--registry', registry.url, '--cache', cache, '--userconfig', userconfig];
  await run('npx', [...npmFlags, packed.name, '--version'], { cwd, env: npmEnv() });
  return performance.now() - started;
}

/** `node <bin> http <backend>` to its ready event, in ms: the installed CLI without npm in front. */
async function binToReady(bin: string): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, [bin, ...httpArgs], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.includes('"event":"ready"')) return performance.now() - started;
    }
    throw new Error(`${bin} exited before ready`);
  } finally {
    child.kill('SIGKILL');
  }
}

/** Where npx installed the package (`<cache>/_npx/<hash>`): its bin and how many other packages it holds. */
async function npxInstall(cache: string): Promise<{ bin: string; packages: number }> {
  const [hash] = await readdir(join(cache, '_npx'));
  if (hash === undefined) throw new Error(`no npx install under ${cache}`);
  const root = join(cache, '_npx', hash);
  const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, unknown>;
  };
  const own = `node_modules/${packed.name}`;
  const packages = Object.keys(lock.packages).filter((key) => key !== '' && key !== own).length;
  return { bin: join(root, own, 'bin', 'tunnel2.js'), packages };
}

try {
  await writeFile(userconfig, '');
  await registry.publish(packed.tarball);
  log(`bench npx: ${packed.name}@${packed.version}, ${runs} runs each, node ${process.version}`);
  const primingMs = await npxToReady(join(work, 'cache-priming'), true);
  log(`  priming run (registry cache cold too): ${Math.round(primingMs)} ms`);
  const coldMs = await repeat('cold npx to ready', (i) => npxToReady(join(work, `cache-cold-${i}`)));
  const warmCache = join(work, 'cache-warm');
  await npxToReady(warmCache);
  const warmMs = await repeat('warm npx to ready', () => npxToReady(warmCache));
  const npmMs = await repeat('warm npx --version', () => npxVersion(warmCache));
  const install = await npxInstall(warmCache);
  const binMs = await repeat('installed bin to ready', () => binToReady(install.bin));

  const result = {
    package: `${packed.name}@${packed.version}`,
    node: process.version,
    runs,
    coldNpxToReadyMs: coldMs,
    warmNpxToReadyMs: warmMs,
    warmNpxVersionMs: npmMs,
    installedBinToReadyMs: binMs,
    primingRunMs: Math.round(primingMs),
    tarballBytes: packed.size,
    unpackedBytes: packed.unpackedSize,
    files: packed.files.length,
    dependencies: Object.keys(packed.dependencies).length,
    installedPackages: install.packages,
    bundledPackages: packed.bundled.length,
  };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else {
    const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} kB`;
    process.stdout.write(
      `| ${result.package}, ${result.node}, median of ${runs} | |\n| --- | --- |\n` +
        `| cold \`npx\` to ready (empty npm cache, empty folder) | ${coldMs} ms |\n` +
        `| warm \`npx\` to ready (package in npx's cache) | ${warmMs} ms |\n` +
        `| warm \`npx ... --version\` (npm's own share) | ${npmMs} ms |\n` +
        `| installed \`tunnel2 http\` to ready (no npm in front) | ${binMs} ms |\n` +
        `| first run ever (registry's cache cold too) | ${result.primingRunMs} ms |\n` +
        `| tarball / unpacked | ${kb(packed.size)} / ${kb(packed.unpackedSize)}, ${result.files} files |\n` +
        `| dependencies / packages npx installs besides it | ${result.dependencies} / ${result.installedPackages} |\n` +
        `| third-party packages bundled in | ${result.bundledPackages} |\n`,
    );
  }
} finally {
  await edge.close(0);
  await backend.close();
  await registry.close();
  await rm(work, { recursive: true, force: true });
}
