import { glob, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type Spawned, spawnNode } from './support/processes.js';

const cliBin = fileURLToPath(new URL('../bin/tunnel2.js', import.meta.url));

// Written at exit by a `--import`ed module: the Node built-ins the process loaded over its whole life.
const dumpAtExit = `
import { writeFileSync } from 'node:fs';
process.on('exit', () => writeFileSync(process.env.TUNNEL2_TEST_MODULE_DUMP, JSON.stringify(process.moduleLoadList)));
`;

/** What reading node:http's exports through an ESM import loads: Node's own undici, and web streams with it. */
const isBundledUndici = (entry: string): boolean =>
  entry === 'NativeModule internal/deps/undici/undici' ||
  entry.startsWith('NativeModule internal/webstreams/');

// An ESM import of node:http makes Node read every export of the module, and its lazy WebSocket getters load
// Node's undici and web streams: 10 MB of RSS in a bare process, 2–3 MB in ours (README.md, "Development").
// The edge and the agent use neither; they load node:http with process.getBuiltinModule.
describe("Node's bundled undici", () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  // The run below sees only the modules its path loads; this covers the rest (cluster, Redis, lazy imports).
  it('is imported as a value from node:http by no source file', async () => {
    const root = fileURLToPath(new URL('../../../', import.meta.url));
    const offenders: string[] = [];
    for await (const file of glob('packages/*/src/**/*.ts', { cwd: root })) {
      const source = await readFile(join(root, file), 'utf8');
      // Every import or re-export statement from node:http that is not `import type` / `export type`.
      for (const statement of source.match(/^(?:import|export)\b[^;]*?from\s+['"]node:http['"]/gm) ?? []) {
        if (!/^(?:import|export)\s+type\b/.test(statement))
          offenders.push(`${file}: ${statement.split('\n')[0]}`);
      }
      if (/\bimport\(\s*['"]node:http['"]\s*\)/.test(source)) offenders.push(`${file}: import('node:http')`);
    }
    expect(offenders).toEqual([]);
  });

  it('is loaded neither by the edge nor by the agent, through a whole request', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-modules-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const preload = join(dir, 'dump-at-exit.mjs');
    await writeFile(preload, dumpAtExit);
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());

    // The agent on the main thread (its stdout is a pipe here, which would put it in a worker, whose modules
    // a preload on the main thread does not see); the worker loads the same modules.
    const start = (name: string, args: string[]): Spawned => {
      const spawned = spawnNode(['--import', preload, cliBin, ...args], {
        TUNNEL2_WORKER: '0',
        TUNNEL2_TEST_MODULE_DUMP: join(dir, `${name}.json`),
      });
      cleanups.push(() => spawned.kill('SIGKILL'));
      return spawned;
    };
    const edge = start('edge', ['server', '--port', '0', '--json', '--log-level', 'warn']);
    const edgeUrl = String((await edge.waitFor('listening')).url);
    const edgePort = Number(new URL(edgeUrl).port);
    const agent = start('agent', [
      'http',
      String(backend.port),
      '--server',
      edgeUrl,
      '--subdomain',
      'mods',
      '--json',
    ]);
    await agent.waitFor('ready');

    const answer = await send({
      port: edgePort,
      path: '/echo/request/modules',
      headers: ['host', `mods.localhost:${edgePort}`],
    });
    expect(answer.status).toBe(200);
    await agent.waitFor('request');

    for (const [name, spawned] of [
      ['agent', agent],
      ['edge', edge],
    ] as const) {
      spawned.kill('SIGTERM');
      expect(await spawned.exited).toBe(0);
      const loaded = JSON.parse(await readFile(join(dir, `${name}.json`), 'utf8')) as string[];
      expect(loaded).toContain('NativeModule http');
      expect({ name, bundled: loaded.filter(isBundledUndici) }).toEqual({ name, bundled: [] });
    }
  });
});
