import { copyFile, cp, glob, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import { build } from 'esbuild';
import { afterEach, describe, expect, it } from 'vitest';
import { PROGRAM_BUNDLE_OPTIONS } from '../../../scripts/pack-cli.js';
import { cliBin, type Spawned, spawnNode } from './support/processes.js';

// Written at exit by a `--import`ed module: the Node built-ins the process loaded over its whole life.
const dumpAtExit = `
import { writeFileSync } from 'node:fs';
process.on('exit', () => writeFileSync(process.env.TUNNEL2_TEST_MODULE_DUMP, JSON.stringify(process.moduleLoadList)));
`;

/** What reading every export of node:crypto and node:net through an ESM import loads (their lazy getters). */
const FACADE_ONLY = [
  'NativeModule internal/crypto/webcrypto',
  'NativeModule internal/blocklist',
  'NativeModule internal/socketaddress',
];

/**
 * Built-ins that dependencies load eagerly and an idle agent on ws:// to a plain HTTP target never uses:
 * undici's HTTP/2 client (node:http2, which loads node:tls), ws (node:https, node:tls, node:zlib), the
 * inspector's file server (node:fs/promises), undici and pino (node:assert, for failed checks). ~5 MB of the idle agent's RSS together (bench/README.md, "Issue
 * #34: the workspace agent's idle memory"); src/lazy-builtins.ts makes them load on first use, in the
 * workspace and in the bundle.
 */
const NOT_AT_IDLE = ['http2', 'tls', 'https', 'zlib', 'fs/promises', 'assert'].map(
  (name) => `NativeModule ${name}`,
);

const cliDir = fileURLToPath(new URL('../', import.meta.url));
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Everything an agent of `bin` loaded (process.moduleLoadList) until it was ready, on ws:// to an HTTP target. */
async function loadedByReadyAgent(bin: string): Promise<string[]> {
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-facades-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const preload = join(dir, 'dump-at-exit.mjs');
  const dump = join(dir, 'agent.json');
  await writeFile(preload, dumpAtExit);
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());

  const edge = spawnNode([cliBin, 'server', '--port', '0', '--json', '--log-level', 'warn']);
  cleanups.push(() => edge.kill('SIGKILL'));
  const edgeUrl = String((await edge.waitFor('listening')).url);
  // On the main thread (a pipe for stdout would put the agent in a worker, whose modules are its own).
  const agent: Spawned = spawnNode(
    ['--import', preload, bin, 'http', String(backend.port), '--server', edgeUrl, '--json'],
    { TUNNEL2_WORKER: '0', TUNNEL2_TEST_MODULE_DUMP: dump },
  );
  cleanups.push(() => agent.kill('SIGKILL'));
  await agent.waitFor('ready');

  agent.kill('SIGTERM');
  expect(await agent.exited).toBe(0);
  const loaded = JSON.parse(await readFile(dump, 'utf8')) as string[];
  expect(loaded).toContain('NativeModule net');
  return loaded;
}

// An ESM import of a built-in makes Node read every export, and node:crypto's `webcrypto` and node:net's
// `BlockList` / `SocketAddress` getters then load modules the agent never uses; the published bundle turns
// such imports into `require` and loads none of them (bench/README.md, "Issue #34": the workspace agent's
// idle RSS). The agent's packages take these built-ins with process.getBuiltinModule.
describe('the agent and the built-ins node:crypto and node:net', () => {
  it('are imported as values by no source file of the agent', async () => {
    const root = fileURLToPath(new URL('../../../', import.meta.url));
    const offenders: string[] = [];
    for await (const file of glob('packages/{cli,inspector,protocol}/src/**/*.ts', { cwd: root })) {
      const source = await readFile(join(root, file), 'utf8');
      for (const statement of source.match(
        /^(?:import|export)\b[^;]*?from\s+['"]node:(?:crypto|net)['"]/gm,
      ) ?? []) {
        if (!/^(?:import|export)\s+type\b/.test(statement))
          offenders.push(`${file}: ${statement.split('\n')[0]}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('load none of what only their ESM facades read, in an agent that is ready', async () => {
    const loaded = await loadedByReadyAgent(cliBin);
    expect(loaded.filter((entry) => FACADE_ONLY.includes(entry))).toEqual([]);
  });
});

describe('the idle agent and the built-ins it has no use for yet', () => {
  it('are not loaded by the workspace agent', async () => {
    const loaded = await loadedByReadyAgent(cliBin);
    expect(loaded.filter((entry) => NOT_AT_IDLE.includes(entry))).toEqual([]);
  });

  it('are not loaded by the bundled agent', async () => {
    // The published layout without the pack's declarations and tarball: bin/, dist/ bundled as
    // scripts/pack-cli.ts bundles it, package.json and the inspector's static/.
    const root = await mkdtemp(join(tmpdir(), 'tunnel2-idle-bundle-'));
    cleanups.push(() => rm(root, { recursive: true, force: true }));
    await build({
      ...PROGRAM_BUNDLE_OPTIONS,
      absWorkingDir: join(cliDir, '..', '..'),
      entryPoints: { main: join(cliDir, 'dist', 'main.js') },
      outdir: join(root, 'dist'),
    });
    await mkdir(join(root, 'bin'));
    for (const file of [
      'tunnel2.js',
      'check-node.js',
      'young-generation.js',
      'optimizing-compiler.js',
      'malloc-arenas.js',
    ]) {
      await copyFile(join(cliDir, 'bin', file), join(root, 'bin', file));
    }
    await copyFile(join(cliDir, 'package.json'), join(root, 'package.json'));
    await cp(join(cliDir, '..', 'inspector', 'static'), join(root, 'static'), { recursive: true });

    const loaded = await loadedByReadyAgent(join(root, 'bin', 'tunnel2.js'));
    expect(loaded.filter((entry) => NOT_AT_IDLE.includes(entry))).toEqual([]);
  });
});
