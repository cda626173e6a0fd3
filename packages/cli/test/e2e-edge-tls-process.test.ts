import { execFile } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type IssuedCertificate, makeTestCa, type TestCa } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Spawned, spawnCli, spawnNode } from './support/processes.js';
import { until } from './support/stack.js';
import { servedCertificate } from './support/tls-edge.js';

// The container's entry point: the process that receives SIGHUP itself.
const edgeBin = fileURLToPath(new URL('../../edge/bin/tunnel2-edge.js', import.meta.url));

let ca: TestCa;
let pair: IssuedCertificate;
let other: IssuedCertificate;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  ca = await makeTestCa();
  pair = await ca.issue('edge', ['localhost']);
  other = await ca.issue('other', ['localhost']);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await ca.dispose();
});

function edge(args: string[], env: NodeJS.ProcessEnv = {}): Spawned {
  const spawned = spawnNode([edgeBin, '--port', '0', ...args], env);
  cleanups.push(() => {
    spawned.kill('SIGKILL');
    return spawned.exited;
  });
  return spawned;
}

/** What a refused start wrote on stderr (all of it), and its exit code. */
async function refused(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; lines: string[] }> {
  const spawned = edge(args, env);
  const code = await spawned.exited;
  return {
    code,
    lines: spawned
      .stderr()
      .split('\n')
      .filter((line) => line !== ''),
  };
}

describe('tunnel2-edge with TLS settings', () => {
  it('refuses to start with one line and exit 1 when a pair is broken, naming the setting and the file', async () => {
    const mismatched = await refused(['--tls-cert', pair.certFile, '--tls-key', other.keyFile]);
    expect(mismatched).toEqual({
      code: 1,
      lines: [
        `tunnel2-edge: invalid setting tlsKey=${other.keyFile}: is not the key of the certificate ${pair.certFile}`,
      ],
    });
    const missing = await refused(['--tls-cert', '/nonexistent/edge.crt', '--tls-key', pair.keyFile]);
    expect(missing).toEqual({
      code: 1,
      lines: ['tunnel2-edge: invalid setting tlsCert=/nonexistent/edge.crt: cannot read it (ENOENT)'],
    });
    const notPem = await refused(['--tls-cert', pair.keyFile, '--tls-key', pair.keyFile]);
    expect(notPem.code).toBe(1);
    expect(notPem.lines).toEqual([
      `tunnel2-edge: invalid setting tlsCert=${pair.keyFile}: not a PEM certificate`,
    ]);
    // A FIFO nothing writes to (a mistyped path, a process substitution gone): refused, not waited on.
    const fifo = join(ca.dir, 'edge-fifo.crt');
    await promisify(execFile)('mkfifo', [fifo]);
    const notFile = await refused(['--tls-cert', fifo, '--tls-key', pair.keyFile]);
    expect(notFile).toEqual({
      code: 1,
      lines: [`tunnel2-edge: invalid setting tlsCert=${fifo}: not a regular file`],
    });
    const unpaired = await refused(['--tls-cert', pair.certFile]);
    expect(unpaired.code).toBe(1);
    expect(unpaired.lines).toEqual([
      'tunnel2-edge: tlsCert and tlsKey come in pairs (the n-th certificate with the n-th key): 1 certificate(s), 0 key(s)',
    ]);
    const redirectAlone = await refused(['--http-port', '0']);
    expect(redirectAlone.code).toBe(1);
    expect(redirectAlone.lines).toHaveLength(1);
    expect(redirectAlone.lines[0]).toContain(
      'httpPort (--http-port) redirects to HTTPS: it needs tlsCert and tlsKey',
    );
  });

  it('takes pairs from the environment (comma-separated, in order) and shows their paths in --print-config', async () => {
    const printed = edge(['--print-config'], {
      TUNNEL2_TLS_CERT: `${pair.certFile},${other.certFile}`,
      TUNNEL2_TLS_KEY: `${pair.keyFile},${other.keyFile}`,
    });
    expect(await printed.exited).toBe(0);
    const config = printed.events
      .map((e) => (e.event === 'text' ? String(e.line) : JSON.stringify(e)))
      .join('\n');
    const parsed = JSON.parse(config) as Record<string, unknown>;
    expect(parsed.tlsCert).toEqual([pair.certFile, other.certFile]);
    expect(parsed.tlsKey).toEqual([pair.keyFile, other.keyFile]);
    expect(config).not.toContain('PRIVATE KEY');
    // The config file: one pair as strings, or several as arrays.
    const file = join(ca.dir, 'edge.json');
    await writeFile(file, JSON.stringify({ tlsCert: pair.certFile, tlsKey: pair.keyFile }));
    const fromFile = edge(['--config', file, '--print-config']);
    expect(await fromFile.exited).toBe(0);
    const fileConfig = JSON.parse(
      fromFile.events.map((e) => (e.event === 'text' ? String(e.line) : JSON.stringify(e))).join('\n'),
    ) as Record<string, unknown>;
    expect(fileConfig.tlsCert).toEqual([pair.certFile]);
    expect(fileConfig.tlsKey).toEqual([pair.keyFile]);
  });

  it('reloads its certificates on SIGHUP and keeps serving', async () => {
    const dir = join(ca.dir, 'sighup');
    await mkdir(dir);
    const cert = join(dir, 'edge.crt');
    const key = join(dir, 'edge.key');
    await copyFile(pair.certFile, cert);
    await copyFile(pair.keyFile, key);
    const spawned = edge([
      '--tls-cert',
      cert,
      '--tls-key',
      key,
      '--json',
      '--log-level',
      'info',
      '--log-format',
      'json',
    ]);
    const url = new URL(String((await spawned.waitFor('listening')).url));
    expect(url.protocol).toBe('https:');
    const port = Number(url.port);
    const before = (await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber;
    spawned.kill('SIGHUP');
    await until(() => spawned.stderr().includes('TLS certificates unchanged'), {
      what: 'the SIGHUP log line',
      timeoutMs: 10_000,
    });
    expect(spawned.child.exitCode).toBe(null);
    expect((await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber).toBe(before);
    await copyFile(other.keyFile, key);
    await copyFile(other.certFile, cert);
    spawned.kill('SIGHUP');
    await until(() => spawned.stderr().includes('TLS certificates reloaded'), {
      what: 'the reload log line',
      timeoutMs: 10_000,
    });
    expect((await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber).not.toBe(before);
    // SIGTERM still drains and stops.
    spawned.kill('SIGTERM');
    expect(await spawned.exited).toBe(0);
  });

  it('reloads on SIGHUP as `tunnel2 server` too, which keeps the default action of SIGHUP without TLS', async () => {
    const withTls = spawnCli([
      'server',
      '--port',
      '0',
      '--json',
      '--log-format',
      'json',
      '--tls-cert',
      pair.certFile,
      '--tls-key',
      pair.keyFile,
    ]);
    cleanups.push(() => {
      withTls.kill('SIGKILL');
      return withTls.exited;
    });
    await withTls.waitFor('listening');
    withTls.kill('SIGHUP');
    await until(() => withTls.stderr().includes('TLS certificates unchanged'), {
      what: 'the SIGHUP log line',
      timeoutMs: 10_000,
    });
    expect(withTls.child.exitCode).toBe(null);
    const plain = spawnCli(['server', '--port', '0', '--json']);
    cleanups.push(() => {
      plain.kill('SIGKILL');
      return plain.exited;
    });
    await plain.waitFor('listening');
    plain.kill('SIGHUP');
    await plain.exited;
    expect(plain.child.signalCode).toBe('SIGHUP');
  });
});
