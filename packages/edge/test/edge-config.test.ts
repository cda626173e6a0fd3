import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultSettings, type ProtocolSettings } from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEdgeCommand } from '../src/edge-server.js';
import { EdgeError, EdgeErrorCode } from '../src/errors.js';
import { parseEdgeCommand } from '../src/settings/edge-args.js';
import { edgeSettingSpecs, envOf, flagOf, settingKeys } from '../src/settings/edge-config.js';
import { resolveEdgeOptions } from '../src/settings/edge-options.js';
import { settingsReference } from '../src/settings/settings-reference.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function configFile(content: unknown, name = 'edge.json'): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

async function failure(promise: Promise<unknown>): Promise<EdgeError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EdgeError);
  expect((err as EdgeError).code).toBe(EdgeErrorCode.INVALID_CONFIG);
  return err as EdgeError;
}

/** Runs the whole command as the bins do, capturing its output. */
async function run(argv: string[], env: NodeJS.ProcessEnv = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runEdgeCommand({
    argv,
    env,
    command: 'tunnel2-edge',
    version: '0.0.0-test',
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    onShutdownSignal: () => () => {},
  });
  return { code, stdout, stderr };
}

describe('edge settings: precedence flag > env > file > default', () => {
  it('takes each setting from the highest source that has it, and says which', async () => {
    const file = await configFile({
      port: 7001,
      domain: 'file.example.com',
      responseTimeoutMs: 1234,
      logLevel: 'warn',
    });
    const { config } = await parseEdgeCommand(['--config', file, '--port', '7003'], {
      TUNNEL2_PORT: '7002',
      TUNNEL2_DOMAIN: 'env.example.com',
    });
    expect(config.settings.port).toBe(7003);
    expect(config.sources.port).toBe('flag');
    expect(config.settings.domain).toBe('env.example.com');
    expect(config.sources.domain).toBe('env');
    expect(config.settings.responseTimeoutMs).toBe(1234);
    expect(config.sources.responseTimeoutMs).toBe('file');
    expect(config.settings.leaseTtlMs).toBe(edgeSettingSpecs.leaseTtlMs.default);
    expect(config.sources.leaseTtlMs).toBe('default');
  });

  it('reads the config file from TUNNEL2_CONFIG too', async () => {
    const file = await configFile({ maxSessionsPerOwner: 3 }, 'via-env.json');
    const { config, configPath } = await parseEdgeCommand([], { TUNNEL2_CONFIG: file });
    expect(configPath).toBe(file);
    expect(config.settings.maxSessionsPerOwner).toBe(3);
  });

  it('parses lists, booleans and their negations from each source', async () => {
    const file = await configFile({ tokens: ['f1', 'f2'], allowAnonymous: true }, 'lists.json');
    const fromFile = await parseEdgeCommand(['-c', file], {});
    expect(fromFile.config.settings.tokens).toEqual(['f1', 'f2']);
    expect(fromFile.config.settings.allowAnonymous).toBe(true);
    const fromEnv = await parseEdgeCommand(['-c', file], {
      TUNNEL2_TOKENS: 'e1, e2',
      TUNNEL2_ALLOW_ANONYMOUS: 'false',
    });
    expect(fromEnv.config.settings.tokens).toEqual(['e1', 'e2']);
    expect(fromEnv.config.settings.allowAnonymous).toBe(false);
    const fromFlags = await parseEdgeCommand(
      ['-c', file, '--token', 'a', '--token', 'b', '--no-allow-anonymous'],
      {
        TUNNEL2_ALLOW_ANONYMOUS: 'true',
      },
    );
    expect(fromFlags.config.settings.tokens).toEqual(['a', 'b']);
    expect(fromFlags.config.settings.allowAnonymous).toBe(false);
  });

  it('derives a flag and a variable for every setting, none shared', () => {
    const flags = settingKeys.map(flagOf);
    const envs = settingKeys.map(envOf);
    expect(new Set(flags).size).toBe(settingKeys.length);
    expect(new Set(envs).size).toBe(settingKeys.length);
    expect(envOf('responseTimeoutMs')).toBe('TUNNEL2_RESPONSE_TIMEOUT_MS');
    expect(flagOf('responseTimeoutMs')).toBe('response-timeout-ms');
    expect(flagOf('tokens')).toBe('token');
  });
});

describe('edge settings: a bad value fails naming the setting, the source and what is allowed', () => {
  it('from a flag', async () => {
    const err = await failure(parseEdgeCommand(['--port', '70000'], {}));
    expect(err.message).toBe('invalid setting port=70000 (from --port): must be an integer in [0, 65535]');
  });

  it('from a variable', async () => {
    const err = await failure(parseEdgeCommand([], { TUNNEL2_LOG_LEVEL: 'loud' }));
    expect(err.message).toBe(
      'invalid setting logLevel=loud (from TUNNEL2_LOG_LEVEL): must be one of fatal, error, warn, info, debug, trace, silent',
    );
  });

  it('from the file, with the file named', async () => {
    const file = await configFile({ responseTimeoutMs: 'soon' }, 'bad-value.json');
    const err = await failure(parseEdgeCommand(['--config', file], {}));
    expect(err.message).toBe(
      `invalid setting responseTimeoutMs=soon (from ${file}: responseTimeoutMs): must be an integer in [1, 3600000]`,
    );
  });

  it('never echoes a secret it refuses', async () => {
    const err = await failure(
      parseEdgeCommand([], { TUNNEL2_TOKENS: '42' }).then(() =>
        parseEdgeCommand(['--config', '/nonexistent/edge.json'], {}),
      ),
    );
    expect(err.message).toContain('cannot read config file /nonexistent/edge.json: ENOENT');
    const file = await configFile({ tokenSecret: 12345 }, 'bad-secret.json');
    const secretErr = await failure(parseEdgeCommand(['--config', file], {}));
    expect(secretErr.message).toContain('invalid setting tokenSecret=<redacted>');
    expect(secretErr.message).not.toContain('12345');
  });

  it('refuses a node id that could not travel in a node-to-node signature, and a registry that is not Redis', async () => {
    const spaced = await failure(parseEdgeCommand(['--node-id', 'edge 1'], {}));
    expect(spaced.message).toBe(
      'invalid setting nodeId=edge 1 (from --node-id): must be 1-64 letters, digits, dots, hyphens or underscores, or unset',
    );
    const registry = await failure(parseEdgeCommand([], { TUNNEL2_REGISTRY: 'postgres://db:5432' }));
    expect(registry.message).toBe(
      'invalid setting registry=postgres://db:5432 (from TUNNEL2_REGISTRY): must be memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL',
    );
    const withPassword = await failure(parseEdgeCommand(['--registry', 'redis://:s3cret@'], {}));
    expect(withPassword.message).not.toContain('s3cret');
    const clusterNoDb = await failure(parseEdgeCommand(['--registry', 'redis+cluster://:s3cret@h:1/2'], {}));
    expect(clusterNoDb.message).not.toContain('s3cret');
  });

  it('takes a Redis Cluster registry (seed list) and redacts its password in --print-config', async () => {
    const url = 'rediss+cluster://tunnel:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002';
    const parsed = await parseEdgeCommand(['--registry', url], {});
    expect(parsed.config.settings.registry).toBe(url);
    const cluster = ['--node-url', 'http://10.0.0.9:8080', '--cluster-secret', 'x'.repeat(32)];
    const result = await run(['--print-config', '--registry', url, ...cluster], {});
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).not.toContain('s3cret');
    expect(result.stdout).toContain(
      'rediss+cluster://tunnel:redacted@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002',
    );
  });

  it('refuses unknown file keys, unknown flags and malformed JSON', async () => {
    const typo = await configFile({ prot: 80 }, 'typo.json');
    expect((await failure(parseEdgeCommand(['--config', typo], {}))).message).toMatch(
      /^unknown setting "prot" in .*typo\.json: known settings are port, host, /,
    );
    const unknown = await parseEdgeCommand(['--prot', '80'], {}).catch((err: unknown) => err);
    expect(unknown).toBeInstanceOf(EdgeError);
    expect(unknown).toMatchObject({
      code: EdgeErrorCode.INVALID_OPTION,
      message: 'unknown option --prot (did you mean --port?)',
    });
    const broken = await configFile('{"port": 80,', 'broken.json');
    expect((await failure(parseEdgeCommand(['--config', broken], {}))).message).toMatch(
      /broken\.json is not valid JSON/,
    );
  });

  it('the command exits 1 at once with one line naming the setting (nothing listens)', async () => {
    const result = await run(['--max-frame-size', '1'], {});
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      'tunnel2-edge: invalid setting maxFrameSize=1 (from --max-frame-size): must be an integer in [16384, 16777215]\n',
    );
  });

  it('cross-setting rules of the edge fail before start too', async () => {
    const open = await run(['--host', '0.0.0.0'], {});
    expect(open.code).toBe(1);
    expect(open.stderr).toMatch(/refusing to accept agents on 0\.0\.0\.0 without authentication/);
    const short = await run(['--token-secret', 'short'], {});
    expect(short.code).toBe(1);
    expect(short.stderr).toContain('tokenSecret: must be at least 16 characters');
  });
});

describe('files the operator names (issue #29: `ca: /dev/zero` read forever)', () => {
  it('a config file that is /dev/zero, a FIFO, a directory or over 1 MiB is refused at once, named', async () => {
    const fifo = join(dir, 'edge.fifo');
    execFileSync('mkfifo', [fifo]);
    const huge = await configFile(`{"port": 1${' '.repeat(1024 * 1024)}}`, 'huge.json');
    const cases: Array<[string, string]> = [
      ['/dev/zero', 'not a regular file (a character device)'],
      [fifo, 'not a regular file (a FIFO)'],
      [dir, 'not a regular file (a directory)'],
      [huge, 'larger than 1 MiB'],
    ];
    for (const [path, problem] of cases) {
      const err = await failure(parseEdgeCommand(['--config', path], {}));
      expect(err.message).toBe(`cannot read config file ${path}: ${problem}`);
    }
  });

  it('a token file that is not a regular file stops the edge with exit 1 and one line', async () => {
    const fifo = join(dir, 'tokens.fifo');
    execFileSync('mkfifo', [fifo]);
    for (const [path, problem] of [
      ['/dev/zero', 'not a regular file (a character device)'],
      [fifo, 'not a regular file (a FIFO)'],
      [join(dir, 'no-such-tokens'), 'cannot read it (ENOENT)'],
    ] as const) {
      const result = await run(['--port', '0', '--token-file', path], {});
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(
        `tunnel2-edge: invalid setting tokenFile=${JSON.stringify(path)}: ${problem}\n`,
      );
    }
  });
});

describe('ports that cannot be had', () => {
  it('a port in use stops the edge with the setting named, for the public and the admin port', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as AddressInfo;
    try {
      const publicPort = await run(['--port', String(port), '--log-level', 'silent'], {});
      expect(publicPort.code).toBe(1);
      expect(publicPort.stderr).toBe(
        `tunnel2-edge: invalid setting port=${port}: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`,
      );
      const adminPort = await run(['--port', '0', '--admin-port', String(port), '--log-level', 'silent'], {});
      expect(adminPort.code).toBe(1);
      expect(adminPort.stderr).toBe(
        `tunnel2-edge: invalid setting adminPort=${port}: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`,
      );
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});

describe('the table and the edge agree', () => {
  it("every default in the table is the edge's own default", async () => {
    const resolved = resolveEdgeOptions({});
    await resolved.registry.close();
    const checked: string[] = [];
    for (const key of settingKeys) {
      const fromEdge: unknown =
        key in resolved
          ? resolved[key as keyof typeof resolved]
          : (resolved.protocol[key as keyof ProtocolSettings] ??
            defaultSettings[key as keyof ProtocolSettings]);
      // Derived or per-start values have no fixed default: a random node id, the registry object, a burst of
      // one second of the rate. The startup grace is off for a program that embeds a fresh edge and 30 s for
      // the server an operator restarts (checked below).
      if (
        fromEdge === undefined ||
        ['nodeId', 'registry', 'sessionRequestBurst', 'startupGraceMs'].includes(key)
      )
        continue;
      expect({ key, value: edgeSettingSpecs[key].default }).toEqual({ key, value: fromEdge });
      checked.push(key);
    }
    expect(checked.length).toBeGreaterThan(25);
    expect(edgeSettingSpecs.drainTimeoutMs.default).toBe(10_000);
    expect(resolved.startupGraceMs).toBe(0);
    expect(edgeSettingSpecs.startupGraceMs.default).toBe(30_000);
    // The edge announces a shorter heartbeat than the protocol's default: the agreed one is the shorter.
    expect(edgeSettingSpecs.heartbeatIntervalMs.default).toBeLessThan(defaultSettings.heartbeatIntervalMs);
  });
});

describe('--help', () => {
  it('lists every setting with its flag, variable and default, even when other settings are invalid', async () => {
    const result = await run(['--port', 'nope', '--help'], { TUNNEL2_LOG_LEVEL: 'loud' });
    expect(result.code).toBe(0);
    for (const key of settingKeys) {
      expect(result.stdout).toContain(`--${flagOf(key)}`);
      expect(result.stdout).toContain(envOf(key));
    }
    expect(result.stdout).toMatch(/-p, --port <n> +listen port for agents and public traffic/);
    expect(result.stdout).toContain('(default 8080; env TUNNEL2_PORT; 0 to 65535)');
  });
});

describe('--print-config', () => {
  it('prints every setting, effective values, secrets redacted, and exits 0', async () => {
    const file = await configFile(
      { domain: 'tunnel.example.com', tokenSecret: 'file-secret-0123456789' },
      'print.json',
    );
    const result = await run(
      ['--print-config', '--config', file, '--token', 'flag-token-1', '--token', 'flag-token-2'],
      {
        TUNNEL2_ADMIN_PORT: '9090',
      },
    );
    expect(result.code).toBe(0);
    const printed = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(Object.keys(printed)).toEqual(settingKeys);
    expect(printed.domain).toBe('tunnel.example.com');
    expect(printed.adminPort).toBe(9090);
    expect(printed.tokens).toEqual(['<redacted>', '<redacted>']);
    expect(printed.tokenSecret).toBe('<redacted>');
    expect(result.stdout).not.toMatch(/flag-token|file-secret/);
  });
});

describe('docs/self-hosting.md', () => {
  it('carries the settings reference generated from the table', async () => {
    const docs = await readFile(new URL('../../../docs/self-hosting.md', import.meta.url), 'utf8');
    // Biome pads the table's columns; the content must be the same.
    const normalize = (markdown: string): string => markdown.replace(/ {2,}/g, ' ').replace(/-{3,}/g, '---');
    expect(normalize(docs)).toContain(normalize(settingsReference()));
  });
});

describe('trustProxy and showSessionCount', () => {
  it('take addresses and CIDR blocks from repeated or comma-separated flags, a variable and the file', async () => {
    const fromFlags = await parseEdgeCommand(
      ['--trust-proxy', '10.0.0.0/8,192.0.2.7', '--trust-proxy', '::1', '--show-session-count'],
      {},
    );
    expect(fromFlags.config.settings.trustProxy).toEqual(['10.0.0.0/8', '192.0.2.7', '::1']);
    expect(fromFlags.config.settings.showSessionCount).toBe(true);
    const fromEnv = await parseEdgeCommand([], { TUNNEL2_TRUST_PROXY: '2001:db8::/32, 127.0.0.1' });
    expect(fromEnv.config.settings.trustProxy).toEqual(['2001:db8::/32', '127.0.0.1']);
    const file = await configFile({ trustProxy: ['172.16.0.0/12'] }, 'trusted.json');
    const fromFile = await parseEdgeCommand(['--config', file], {});
    expect(fromFile.config.settings.trustProxy).toEqual(['172.16.0.0/12']);
    expect(fromFile.config.settings.showSessionCount).toBe(false);
  });

  it('refuse anything that is not an address or a block, naming the entry', async () => {
    for (const bad of ['proxy.example.com', '10.0.0.0/33', '10.0.0.1/', '10.0.0.0/8/9']) {
      const err = await failure(parseEdgeCommand(['--trust-proxy', bad], {}));
      expect(err.message).toMatch(/trustProxy/);
    }
    expect(() => resolveEdgeOptions({ trustProxy: ['10.0.0.1/'] })).toThrow(/"10\.0\.0\.1\/"/);
  });
});

describe('workers (`--workers N`)', () => {
  it('takes a count or auto (the cores Node sees) from a flag, a variable and the file; 1 by default', async () => {
    expect((await parseEdgeCommand([], {})).config.settings.workers).toBe(1);
    expect((await parseEdgeCommand(['--workers', '4'], {})).config.settings.workers).toBe(4);
    expect((await parseEdgeCommand([], { TUNNEL2_WORKERS: 'auto' })).config.settings.workers).toBe(
      availableParallelism(),
    );
    const file = await configFile({ workers: 2 }, 'workers.json');
    expect((await parseEdgeCommand(['--config', file], {})).config.settings.workers).toBe(2);
    const err = await failure(parseEdgeCommand(['--workers', '0'], {}));
    expect(err.message).toBe(
      'invalid setting workers=0 (from --workers): must be auto, or an integer in [1, 256]',
    );
  });
});
