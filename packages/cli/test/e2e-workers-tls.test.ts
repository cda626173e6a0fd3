import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type IssuedCertificate, makeTestCa, type TestCa } from '@tunnel2/test-services';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Spawned, spawnNode } from './support/processes.js';
import { until } from './support/stack.js';
import { servedCertificate } from './support/tls-edge.js';

// The container's entry point with TUNNEL2_WORKERS=2 and TLS: the primary (PID 1 in a container) receives
// SIGHUP and passes it on to its workers, each of which reloads its certificates; the primary itself is not
// killed by it (SIGHUP's default action).

const edgeBin = fileURLToPath(new URL('../../edge/bin/tunnel2-edge.js', import.meta.url));

let ca: TestCa;
let pair: IssuedCertificate;
let other: IssuedCertificate;
let spawned: Spawned | undefined;

beforeAll(async () => {
  ca = await makeTestCa();
  pair = await ca.issue('edge', ['localhost']);
  other = await ca.issue('other', ['localhost']);
});
afterAll(async () => {
  if (spawned !== undefined && spawned.child.exitCode === null) {
    spawned.kill('SIGKILL');
    await spawned.exited;
  }
  await ca.dispose();
});

it('serves TLS from every worker and reloads every worker on the primary SIGHUP', async () => {
  const dir = join(ca.dir, 'workers');
  await mkdir(dir);
  const cert = join(dir, 'edge.crt');
  const key = join(dir, 'edge.key');
  await copyFile(pair.certFile, cert);
  await copyFile(pair.keyFile, key);
  spawned = spawnNode(
    [edgeBin, '--port', '0', '--tls-cert', cert, '--tls-key', key, '--json', '--log-level', 'info'],
    { TUNNEL2_WORKERS: '2', TUNNEL2_LOG_FORMAT: 'json' },
  );
  const listening = await spawned.waitFor('listening');
  expect(listening.workers).toBe(2);
  const url = new URL(String(listening.url));
  expect(url.protocol).toBe('https:');
  const port = Number(url.port);
  const before = (await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber;
  const workerLines = (text: string): number =>
    (spawned?.stderr() ?? '').split('\n').filter((line) => line.includes(text) && line.includes('"worker"'))
      .length;
  // Nothing changed: only the signal makes the workers look, and each says so.
  spawned.kill('SIGHUP');
  await until(() => workerLines('TLS certificates unchanged') >= 2, {
    what: 'both workers checking on SIGHUP',
    timeoutMs: 10_000,
  });
  expect(spawned.child.exitCode).toBe(null);
  await copyFile(other.keyFile, key);
  await copyFile(other.certFile, cert);
  const log = spawned;
  spawned.kill('SIGHUP');
  // Both workers reloaded (each logs it with its worker number).
  await until(
    () =>
      log
        .stderr()
        .split('\n')
        .filter((line) => line.includes('TLS certificates reloaded') && line.includes('"worker"')).length >=
      2,
    { what: 'both workers reloading', timeoutMs: 10_000 },
  );
  expect(spawned.child.exitCode).toBe(null);
  // Connections land on both workers in turn: every one is served the new certificate.
  for (let i = 0; i < 4; i++)
    expect((await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber).not.toBe(before);
  spawned.kill('SIGTERM');
  expect(await spawned.exited).toBe(0);
}, 60_000);
