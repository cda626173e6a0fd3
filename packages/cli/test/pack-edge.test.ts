import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnNode } from './support/processes.js';

// The edge image's application folder (docker/Dockerfile runs scripts/pack-edge.ts): the bundled edge must run
// on its own, with no node_modules beside it, and carry the licenses of what it bundles. The docker smoke test
// checks the same folder inside the built image; this checks it wherever the suite runs.
const { packEdge } = (await import(new URL('../../../scripts/pack-edge.ts', import.meta.url).href)) as {
  packEdge: (outDir: string) => Promise<string[]>;
};

describe('scripts/pack-edge.ts: the edge bundled for its image', () => {
  let dir: string;
  let bundled: string[];
  const cleanups: (() => unknown)[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-pack-edge-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    bundled = await packEdge(join(dir, 'app'));
  });

  afterAll(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('holds the bin, the bundle, the manifest and the notices, and no node_modules', async () => {
    const app = join(dir, 'app');
    expect((await readdir(app)).sort()).toEqual([
      'LICENSE',
      'THIRD-PARTY-NOTICES.md',
      'bin',
      'dist',
      'package.json',
    ]);
    expect(bundled).toEqual(
      expect.arrayContaining([expect.stringMatching(/^fastify@/), expect.stringMatching(/^ws@/)]),
    );
    const notices = await readFile(join(app, 'THIRD-PARTY-NOTICES.md'), 'utf8');
    for (const id of bundled) expect(notices).toContain(`## ${id}`);
    const manifest = JSON.parse(await readFile(join(app, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest).toMatchObject({ name: '@tunnel2/edge', type: 'module' });
    expect(manifest).not.toHaveProperty('dependencies');
  });

  it('runs on its own: an agent connects and a request goes through it', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge: Spawned = spawnNode([
      join(dir, 'app', 'bin', 'tunnel2-edge.js'),
      '--port',
      '0',
      '--host',
      '127.0.0.1',
      '--json',
      '--log-level',
      'warn',
    ]);
    cleanups.push(() => edge.kill('SIGKILL'));
    const url = String((await edge.waitFor('listening')).url);
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'packed' });
    cleanups.push(() => tunnel.close(0));
    const port = Number(new URL(url).port);
    const answer = await send({
      port,
      path: '/loadtest/ping',
      headers: ['host', `packed.localhost:${port}`],
    });
    expect({ status: answer.status, body: answer.body.toString() }).toEqual({ status: 200, body: 'pong' });
    edge.kill('SIGTERM');
    expect(await edge.exited).toBe(0);
  });
});
