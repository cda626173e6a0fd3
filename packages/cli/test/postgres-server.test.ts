import { once } from 'node:events';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accepts, freePort } from '@tunnel2/test-services';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestPostgres } from './support/postgres-server.js';

// A PostgreSQL that fails to come up must not outlive the test, nor leave its data directory behind.

const parent = mkdtempSync(join(tmpdir(), 'tunnel2-pg-test-'));
// Run as root, the server runs as `postgres`, which must reach its directory inside this one.
chmodSync(parent, 0o755);
afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe('startTestPostgres when the server does not come up', () => {
  it('stops the server and removes its directory when the ready line never comes', async () => {
    const port = await freePort();
    await expect(
      startTestPostgres({
        port,
        parentDir: parent,
        // The server runs and listens, but its ready line (level LOG, which ranks below FATAL) is not printed.
        extraArgs: ['-c', 'log_min_messages=fatal'],
        readyTimeoutMs: 3_000,
      }),
    ).rejects.toThrow('postgres not ready');
    expect(await accepts(port)).toBe(false);
    expect(readdirSync(parent)).toEqual([]);
  });

  it('removes its directory when the server exits first (its port is taken)', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    try {
      const { port } = taken.address() as { port: number };
      await expect(startTestPostgres({ port, parentDir: parent })).rejects.toThrow('postgres exited');
      expect(readdirSync(parent)).toEqual([]);
    } finally {
      taken.close();
    }
  });
});
