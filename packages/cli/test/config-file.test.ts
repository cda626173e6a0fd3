import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkTunnelConfig, loadTunnelConfig } from '../src/config/config-file.js';

const check = (tunnels: Record<string, unknown>) => checkTunnelConfig('t.yml', { tunnels });

/** The message a check throws, or undefined when it passes. */
function refusal(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

describe('a config file takes what the command line takes', () => {
  it('a target with a path, an IPv6 host, a URL: the same parser as tunnel2 http and tcp', () => {
    for (const target of [
      'localhost:40511/api',
      '[::1]:3000/base',
      'http://127.0.0.1:3000/x',
      3000,
      '3000',
    ]) {
      expect(check({ web: { target } }).tunnels[0]?.target).toBe(String(target));
    }
    expect(check({ db: { proto: 'tcp', target: '[::1]:5432' } }).tunnels[0]?.target).toBe('[::1]:5432');
  });

  it('refuses what the command line refuses, naming the key', () => {
    expect(refusal(() => check({ web: { target: 'ftp://x:21' } }))).toBe(
      't.yml: tunnels.web.target: expected a port, host:port or URL, got "ftp://x:21"',
    );
    expect(refusal(() => check({ web: { target: 70000 } }))).toBe(
      't.yml: tunnels.web.target: expected a port, host:port or URL, got 70000',
    );
    expect(refusal(() => check({ db: { proto: 'tcp', target: 'localhost:5432/x' } }))).toBe(
      't.yml: tunnels.db.target: expected a port or host:port, got "localhost:5432/x"',
    );
    expect(refusal(() => check({ web: { target: 3000, host_header: 'a\nb' } }))).toBe(
      't.yml: tunnels.web.host_header: expected rewrite, preserve or a host value, got "a\\nb"',
    );
    expect(check({ web: { target: 3000, host_header: 'preserve' } }).tunnels[0]?.hostHeader).toBe('preserve');
  });

  it('h2c and http1 as --h2c and --http1: booleans, and the same contradictions refused', () => {
    expect(check({ grpc: { target: 50051, h2c: true } }).tunnels[0]).toMatchObject({ h2c: true });
    expect(check({ web: { target: 'https://localhost:8443', http1: true } }).tunnels[0]).toMatchObject({
      http1: true,
    });
    expect(refusal(() => check({ grpc: { target: 50051, h2c: 'yes' } }))).toBe(
      't.yml: tunnels.grpc.h2c: expected true or false, got "yes"',
    );
    expect(refusal(() => check({ grpc: { target: 50051, h2c: true, http1: true } }))).toBe(
      't.yml: tunnels.grpc.h2c: h2c and http1 contradict each other: h2c speaks HTTP/2 to the backend, http1 HTTP/1.1 only',
    );
    expect(refusal(() => check({ grpc: { target: 'https://localhost:8443', h2c: true } }))).toMatch(
      /^t\.yml: tunnels\.grpc\.h2c: h2c is HTTP\/2 over plain TCP: an https:\/\/ target gets h2 by ALPN/,
    );
  });

  it('replica as --replica: a boolean, only beside a subdomain (HTTP) or a remote_port (TCP)', () => {
    expect(check({ web: { target: 3000, subdomain: 'shop', replica: true } }).tunnels[0]).toMatchObject({
      replica: true,
    });
    expect(check({ web: { target: 3000, subdomain: 'shop' } }).tunnels[0]?.replica).toBeUndefined();
    expect(refusal(() => check({ web: { target: 3000, subdomain: 'shop', replica: 'yes' } }))).toBe(
      't.yml: tunnels.web.replica: expected true or false, got "yes"',
    );
    expect(refusal(() => check({ web: { target: 3000, replica: true } }))).toBe(
      't.yml: tunnels.web.replica: a replica joins a name: set subdomain too',
    );
    expect(refusal(() => check({ db: { proto: 'tcp', target: 5432, replica: true } }))).toBe(
      't.yml: tunnels.db.replica: TCP replicas share one public port: set remote_port too',
    );
    expect(
      check({ db: { proto: 'tcp', target: 5432, remote_port: 40000, replica: true } }).tunnels[0],
    ).toMatchObject({ replica: true, tcp: { remotePort: 40000 } });
  });

  it('quotes a tunnel name that would read as a deeper key path', () => {
    expect(refusal(() => check({ 'my.app': { target: 3000 } }))).toBe(
      't.yml: tunnels["my.app"]: a tunnel name is letters, digits, - and _ (at most 32 characters)',
    );
  });
});

describe('reading the file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-config-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('a YAML mistake names its line and column', async () => {
    const path = join(dir, 'broken.yml');
    await writeFile(path, 'tunnels:\n  web: { target: 3000 }\n  api: { target: [\n');
    await expect(loadTunnelConfig(path)).rejects.toThrow(
      /^broken\.yml: not valid YAML at line 4, column 1: /,
    );
  });

  it('an empty file says what to put in it', async () => {
    const path = join(dir, 'empty.yml');
    await writeFile(path, '\n# nothing yet\n');
    await expect(loadTunnelConfig(path)).rejects.toThrow(
      'empty.yml: the file is empty: list tunnels under `tunnels:`',
    );
  });

  it('a missing file is named as the user gave it', async () => {
    const given = relative(process.cwd(), join(dir, 'nope.yml'));
    await expect(loadTunnelConfig(given)).rejects.toThrow(
      `${given}: not found (create it, or pass --config <file>)`,
    );
  });
});
