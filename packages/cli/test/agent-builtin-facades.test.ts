import { glob, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
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

// An ESM import of a built-in makes Node read every export, and node:crypto's `webcrypto` and node:net's
// `BlockList` / `SocketAddress` getters then load modules the agent never uses; the published bundle turns
// such imports into `require` and loads none of them (bench/README.md, "Issue #34": the workspace agent's
// idle RSS). The agent's packages take these built-ins with process.getBuiltinModule.
describe('the agent and the built-ins node:crypto and node:net', () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

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
      ['--import', preload, cliBin, 'http', String(backend.port), '--server', edgeUrl, '--json'],
      { TUNNEL2_WORKER: '0', TUNNEL2_TEST_MODULE_DUMP: dump },
    );
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');

    agent.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
    const loaded = JSON.parse(await readFile(dump, 'utf8')) as string[];
    expect(loaded).toContain('NativeModule net');
    expect(loaded.filter((entry) => FACADE_ONLY.includes(entry))).toEqual([]);
  });
});
