import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { cliBin, type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';

const run = promisify(execFile);
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [cliBin, ...args], {
      env: { ...process.env, TUNNEL2_TOKEN_SECRET: undefined, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('tunnel2 CLI', () => {
  it('--version prints the package version', async () => {
    const { code, stdout } = await cli(['--version']);
    expect(code).toBe(0);
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('start --help points at what the npm package ships: the JSON Schema', async () => {
    const { code, stdout } = await cli(['start', '--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('node_modules/@tunnel2/cli/tunnel2.schema.json');
  });

  it('http --help shows the flags and examples', async () => {
    const { code, stdout } = await cli(['http', '--help']);
    expect(code).toBe(0);
    for (const flag of ['--server', '--subdomain', '--token', '--host-header', '--json', 'Examples:']) {
      expect(stdout).toContain(flag);
    }
  });

  it("--json's help names every event the README's --json table lists (http: request; tcp: connection)", async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const table = readme.slice(readme.indexOf('### `--json` events'), readme.indexOf('With `tunnel2 start`'));
    const events = [...table.matchAll(/^\| `(\w+)` /gm)].map((m) => m[1] ?? '');
    expect(events).toContain('finishing');
    for (const [command, other] of [
      ['http', 'connection'],
      ['tcp', 'request'],
    ] as const) {
      const { stdout } = await cli([command, '--help']);
      const json = stdout.slice(stdout.indexOf('--json'), stdout.indexOf('--log-level')).replace(/\s+/g, ' ');
      expect(events.filter((event) => event !== other && !json.includes(event))).toEqual([]);
    }
  });

  // The repository's README and the package's (the page npm shows, and the one in the tarball) alike.
  for (const [label, readmePath] of [
    ['README.md', '../../../README.md'],
    ['packages/cli/README.md', '../README.md'],
  ] as const) {
    it(`${label}: the tunnel2 http table lists every flag http --help has`, async () => {
      const { stdout } = await cli(['http', '--help']);
      const flags = [...stdout.matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1] ?? '');
      expect(flags).toContain('--basic-auth');
      const readme = await readFile(new URL(readmePath, import.meta.url), 'utf8');
      const section = readme.slice(readme.indexOf('# `tunnel2 http <target>`'));
      const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| flag')));
      // --help is commander's own; the table covers the tunnel's flags.
      const listed = (flag: string) => new RegExp(`(^|[^\\w-])${flag}(?![\\w-])`).test(table);
      expect(flags.filter((flag) => flag !== '--help' && !listed(flag))).toEqual([]);
    });

    it(`${label}: the tunnel2 tcp section names every flag tcp --help has`, async () => {
      const { stdout } = await cli(['tcp', '--help']);
      const flags = [...stdout.matchAll(/^ {2}(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1] ?? '');
      expect(flags).toContain('--remote-port');
      const readme = await readFile(new URL(readmePath, import.meta.url), 'utf8');
      const start = readme.indexOf('# `tunnel2 tcp <target>`');
      expect(start).toBeGreaterThan(-1);
      const section = readme.slice(start, readme.indexOf('\n#', start + 1));
      const listed = (flag: string) => new RegExp(`(^|[^\\w-])${flag}(?![\\w-])`).test(section);
      expect(flags.filter((flag) => flag !== '--help' && !listed(flag))).toEqual([]);
    });
  }

  it('a bad target is one line with the accepted forms and exit code 2, at once', async () => {
    for (const target of ['not a port!', 'notaport', '99999', 'ftp://x', '0', 'localhost:']) {
      // No --server: nothing is dialled, the target is refused before anything starts.
      const { code, stdout, stderr } = await cli(['http', target]);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toBe(
        `tunnel2: target "${target}" is not a port, host:port or http(s) URL (examples: 3000, localhost:3000, http://127.0.0.1:3000, https://localhost:8443)\n`,
      );
    }
    for (const target of ['notaport', '99999', 'http://localhost:5432']) {
      const { code, stderr } = await cli(['tcp', target]);
      expect(code).toBe(2);
      expect(stderr).toMatch(
        /^tunnel2: TCP target ".*" is not a port or host:port \(examples: 5432, localhost:5432/,
      );
      expect(stderr.split('\n')).toHaveLength(2);
    }
  });

  // Issue "The everyday loop, polished", 5: a usage error printed the whole help and exited 1.
  it('a usage error exits 2 with the error, one usage line and where the help is, for every command', async () => {
    const cases: [args: string[], error: string, usage: string][] = [
      [['http', '--bogus', '3000'], "unknown option '--bogus'", 'tunnel2 http [options] <target>'],
      [['http'], "missing required argument 'target'", 'tunnel2 http [options] <target>'],
      [
        ['http', '3000', '--server'],
        "option '-s, --server <url>' argument missing",
        'tunnel2 http [options] <target>',
      ],
      [['http', '3000', 'extra'], "too many arguments for 'http'", 'tunnel2 http [options] <target>'],
      [
        ['http', '3000', '--host-header='],
        "option '--host-header <mode>' argument '' is invalid",
        'tunnel2 http [options] <target>',
      ],
      [['tcp', '--nope', '5432'], "unknown option '--nope'", 'tunnel2 tcp [options] <target>'],
      [['tcp'], "missing required argument 'target'", 'tunnel2 tcp [options] <target>'],
      [
        ['tcp', '5432', '--remote-port'],
        "option '--remote-port <port>' argument missing",
        'tunnel2 tcp [options] <target>',
      ],
      [['start', '--nope'], "unknown option '--nope'", 'tunnel2 start [options] [names...]'],
      [
        ['start', '--config'],
        "option '-c, --config <file>' argument missing",
        'tunnel2 start [options] [names...]',
      ],
      [['server', '--config'], "option '-c, --config <file>' argument missing", 'tunnel2 server [options]'],
      [['token'], "required option '--secret <secret>' not specified", 'tunnel2 token [options]'],
      [['token', '--secret'], "option '--secret <secret>' argument missing", 'tunnel2 token [options]'],
      [
        ['token', '--secret', '0123456789abcdef', '--ttl', 'x'],
        '--ttl x: a positive whole number of seconds',
        'tunnel2 token [options]',
      ],
      [['bogus'], "unknown command 'bogus'", 'tunnel2 [options] [command]'],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args)));
    cases.forEach(([args, error, usage], i) => {
      const { code, stdout, stderr } = results[i]!;
      const command = usage.split(' [')[0];
      expect({ args, code, stdout }).toEqual({ args, code: 2, stdout: '' });
      const lines = stderr.split('\n');
      expect(lines).toHaveLength(4);
      expect(lines[0]).toContain(`tunnel2: ${error}`);
      expect(lines.slice(1)).toEqual([`usage: ${usage}`, `see ${command} --help`, '']);
    });
  });

  it('token: a secret shorter than the edge takes is refused (exit 2); one the edge takes mints a token', async () => {
    // The edge's own bound, as `tunnel2 server --token-secret` applies it.
    expect(() => buildEdge({ port: 0, logger: silent, auth: { tokenSecret: 'x'.repeat(15) } })).toThrow(
      /at least 16 characters/,
    );
    const short = await cli(['token', '--secret', 'x'.repeat(15)]);
    expect(short.code).toBe(2);
    expect(short.stdout).toBe('');
    expect(short.stderr.split('\n')[0]).toBe(
      'tunnel2: the token secret is 15 characters; the edge takes at least 16 (e.g. openssl rand -hex 32)',
    );
    const fromEnv = await cli(['token'], { TUNNEL2_TOKEN_SECRET: 'short' });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toMatch(/^tunnel2: the token secret is 5 characters;/);
    const ok = await cli(['token', '--secret', 'x'.repeat(16), '--subject', 'alice']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^t2\.[\w-]+\.[\w-]+\n$/);
  });

  it('token --help shows examples', async () => {
    const { code, stdout } = await cli(['token', '--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('Examples:');
    expect(stdout).toContain('tunnel2 token --secret');
    expect(stdout).toContain('at least 16 characters');
  });

  it('--json reports a bad target as one error event, exit code 2', async () => {
    const { code, stdout } = await cli(['http', 'notaport', '--json']);
    expect(code).toBe(2);
    const events = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(events).toEqual([
      // A usage error is fatal: the command exits 2 at once.
      expect.objectContaining({ event: 'error', code: 'TUNNEL2_ERR_INVALID_TARGET', fatal: true }),
    ]);
  });

  it('--json prints ready with the URLs, a request event per request, and exits 0 on SIGINT', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent: Spawned = spawnCli([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'jsonapp',
      '--json',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    const ready = await agent.waitFor('ready');
    expect(ready.url).toBe(`http://jsonapp.localhost:${port}/`);
    expect(ready.urls).toContain(`http://localhost:${port}/session/jsonapp/`);
    const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `jsonapp.localhost:${port}`] });
    expect(res.status).toBe(200);
    const event = await agent.waitFor('request');
    expect(event).toMatchObject({ method: 'GET', path: '/loadtest/ping', status: 200 });
    expect(typeof event.durationMs).toBe('number');
    agent.kill('SIGINT');
    expect(await agent.exited).toBe(0);
    expect(agent.events.map((e) => e.event)).toContain('closed');
  });

  it('SIGTERM (a process manager stopping it): finishing says a second SIGTERM stops now, not Ctrl-C; then exit 143', async () => {
    let held: (() => void) | undefined;
    const arrived = new Promise<void>((resolve) => {
      held = resolve;
    });
    const backend = createServer(() => held?.());
    backend.listen(0, '127.0.0.1');
    await once(backend, 'listening');
    cleanups.push(() => {
      backend.closeAllConnections();
      backend.close();
    });
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const backendPort = (backend.address() as AddressInfo).port;
    const agent = spawnCli([
      'http',
      String(backendPort),
      '--server',
      url,
      '--subdomain',
      'termed',
      '--no-inspect',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    // Human output: its first line on stdout is the forwarding line (the tunnel is up).
    expect((await agent.waitFor('text')).line).toMatch(/^tunnel2: forwarding /);
    const answer = send({ port, path: '/held', headers: ['Host', `termed.localhost:${port}`] }).catch(
      () => undefined,
    );
    await arrived;
    agent.kill('SIGTERM');
    await until(() => agent.stderr().includes('finishing'));
    expect(agent.stderr()).toContain('tunnel2: finishing 1 request (SIGTERM again to stop now)\n');
    agent.kill('SIGTERM');
    expect(await agent.exited).toBe(143);
    await answer;
  });

  it('--json through a pipe (the worker): a second SIGINT stops at once, exit 130, closed says what it cut', async () => {
    let held: (() => void) | undefined;
    const arrived = new Promise<void>((resolve) => {
      held = resolve;
    });
    const backend = createServer(() => held?.());
    backend.listen(0, '127.0.0.1');
    await once(backend, 'listening');
    cleanups.push(() => {
      backend.closeAllConnections();
      backend.close();
    });
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const backendPort = (backend.address() as AddressInfo).port;
    const agent = spawnCli([
      'http',
      String(backendPort),
      '--server',
      url,
      '--subdomain',
      'jsoncut',
      '--json',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    const answer = send({ port, path: '/held', headers: ['Host', `jsoncut.localhost:${port}`] }).then(
      (res) => res.status,
      () => 'failed',
    );
    await arrived;
    agent.kill('SIGINT');
    // Heard before the second is sent: two signals sent at once may reach the process as one.
    expect(await agent.waitFor('finishing')).toMatchObject({ count: 1 });
    agent.kill('SIGINT');
    // The backend never answers: exiting did not wait for it.
    expect(await agent.exited).toBe(130);
    expect(agent.events.at(-1)).toMatchObject({ event: 'closed', cut: 1 });
    expect(await answer).not.toBe(200);
  });

  it('human output starts with the public URL', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent = spawnCli(['http', String(backend.port), '--server', url, '--subdomain', 'human']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const first = await agent.waitFor('text');
    expect(String(first.line)).toContain(`http://human.localhost:${port}/`);
    agent.kill('SIGINT');
    expect(await agent.exited).toBe(0);
  });

  it('reconnects after the edge restarts and keeps its name', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const first = spawnCli(['server', '--port', '0', '--json', '--log-level', 'warn']);
    cleanups.push(() => first.kill('SIGKILL'));
    const url = String((await first.waitFor('listening')).url);
    const port = new URL(url).port;
    const agent = spawnCli(['http', String(backend.port), '--server', url, '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const ready = await agent.waitFor('ready');
    first.kill('SIGKILL');
    await first.exited;
    await agent.waitFor('reconnecting');
    const second = spawnCli(['server', '--port', port, '--json', '--log-level', 'warn']);
    cleanups.push(() => second.kill('SIGKILL'));
    await second.waitFor('listening');
    // Wait for the second ready event: the same random name on the new edge.
    while (agent.events.filter((e) => e.event === 'ready').length < 2) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (agent.child.exitCode !== null) throw new Error(agent.stderr());
    }
    const again = agent.events.filter((e) => e.event === 'ready')[1]!;
    expect(again.name).toBe(ready.name);
    const res = await send({
      port: Number(port),
      path: '/loadtest/ping',
      headers: ['Host', `${String(ready.name)}.localhost:${port}`],
    });
    expect(res.status).toBe(200);
  });
});
