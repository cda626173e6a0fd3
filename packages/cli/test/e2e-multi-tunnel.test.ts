import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge } from '@tunnel2/edge';
import { freePort } from '@tunnel2/test-services';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { makeCertificates, startHttpsBackend } from './support/https-backend.js';
import { cli, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';
import { portRange, sendAndHash, startHashServer } from './support/tcp-stack.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-multi-'));
  return () => rm(dir, { recursive: true, force: true });
});

async function file(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

/** An HTTP server answering `<label> <path>`, so a test sees which backend a request reached. */
async function labelled(label: string): Promise<number> {
  const server: Server = createServer((req, res) => res.end(`${label} ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

async function startEdge() {
  const edge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  return edge;
}

function startCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  const agent = spawnCli(args, env);
  cleanups.push(async () => {
    agent.kill('SIGINT');
    await agent.exited;
  });
  return agent;
}

/** An edge and a backend, and another agent holding `name` on that edge. */
async function nameHeldElsewhere(name: string) {
  const edge = await startEdge();
  const web = await labelled('web');
  const other = await connect({ target: web, server: edge.url, subdomain: name, inspect: false });
  cleanups.push(() => other.close(0));
  return { edge, web };
}

/** What a taken name in a config file gets as advice. */
function advice(tunnel: string, config: string): string {
  return `Choose another tunnels.${tunnel}.subdomain in ${config}, or run with the token that holds it (--token, TUNNEL2_TOKEN or token: in the file)`;
}

describe('tunnel2 start: several tunnels from one file over one session', () => {
  it('serves two HTTP tunnels and a TCP tunnel over one WebSocket, each to its own target', async () => {
    const edge = await startEdge();
    const web = await labelled('web');
    const api = await labelled('api');
    const hash = await startHashServer();
    cleanups.push(hash.close);
    const config = await file(
      'tunnel2.yml',
      [
        `server: ${edge.url}`,
        'tunnels:',
        `  web: { target: ${web}, subdomain: multi-web }`,
        `  api: { target: "127.0.0.1:${api}", subdomain: multi-api }`,
        `  db: { proto: tcp, target: ${hash.port} }`,
      ].join('\n'),
    );
    const agent = startCli(['start', '--all', '--config', config, '--json']);
    const ready = new Map<unknown, Record<string, unknown>>();
    while (ready.size < 3) {
      const event = await agent.waitFor('ready');
      ready.set(event.tunnel, event);
      agent.events.splice(agent.events.indexOf(event), 1);
    }
    expect(ready.get('web')?.name).toBe('multi-web');
    expect(ready.get('api')?.name).toBe('multi-api');
    expect(String(ready.get('db')?.url)).toMatch(/^tcp:\/\//);
    // One agent session carries the three names.
    expect(edge.sessions.size).toBe(1);
    expect(edge.sessions.names).toBe(3);

    const get = async (name: string) => (await fetch(`${edge.url}/session/${name}/x`)).text();
    expect(await get('multi-web')).toBe('web /x');
    expect(await get('multi-api')).toBe('api /x');
    const port = Number(new URL(String(ready.get('db')?.url)).port);
    const { sent, answer } = await sendAndHash(port, 64 * 1024);
    expect(answer).toBe(sent);

    const request = await agent.waitFor('request');
    expect(['web', 'api']).toContain(request.tunnel);
  });

  it('fails the start naming the tunnel whose name is taken, and why', async () => {
    const { edge, web } = await nameHeldElsewhere('taken-name');
    const config = await file(
      'taken.yml',
      ['tunnels:', `  web: { target: ${web} }`, `  api: { target: ${web}, subdomain: taken-name }`].join(
        '\n',
      ),
    );
    const result = await cli(['start', '--all', '--config', config, '--server', edge.url, '--json']);
    expect(result.code).toBe(1);
    const error = result.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((event) => event.event === 'error');
    expect(error?.code).toBe('TUNNEL2_ERR_TUNNEL_REFUSED');
    expect(error?.edgeCode).toBe('TUNNEL2_ERR_NAME_IN_USE');
    expect(String(error?.message)).toBe(
      `tunnel api: subdomain "taken-name" is taken by another agent (TUNNEL2_ERR_NAME_IN_USE). ${advice('api', config)}`,
    );
    expect(error?.fatal).toBe(true);
    expect(edge.sessions.size).toBe(1); // only the other agent's
  });

  it("says what to do, in the file, when the first tunnel's name is taken", async () => {
    const { edge, web } = await nameHeldElsewhere('first-taken');
    const config = await file(
      'taken-first.yml',
      ['tunnels:', `  web: { target: ${web}, subdomain: first-taken }`, `  api: { target: ${web} }`].join(
        '\n',
      ),
    );
    const result = await cli(['start', '--all', '--config', config, '--server', edge.url]);
    expect(result.code).toBe(1);
    expect(result.stderr.split('\n')[0]).toBe(
      `tunnel2: tunnel web: edge refused the tunnel (409): subdomain "first-taken" is taken by another agent. ${advice('web', config)}`,
    );
  });

  it('says a configured subdomain is reserved by the edge, naming the tunnel (own or listed)', async () => {
    const edge = await startEdge();
    const web = await labelled('web');
    for (const [lines, tunnel, name] of [
      [[`  web: { target: ${web}, subdomain: www }`, `  api: { target: ${web} }`], 'web', 'www'],
      [[`  web: { target: ${web} }`, `  api: { target: ${web}, subdomain: api }`], 'api', 'api'],
    ] as const) {
      const config = await file('reserved.yml', ['tunnels:', ...lines].join('\n'));
      const result = await cli(['start', '--all', '--config', config, '--server', edge.url]);
      expect(result.code).toBe(1);
      const refusal = result.stderr.split('\n').find((line) => line.includes('reserved'));
      expect(refusal).toContain(`tunnel ${tunnel}: `);
      expect(refusal).toContain(`subdomain "${name}" is reserved by this edge`);
    }
    expect(edge.sessions.size).toBe(0);
  });

  it('keeps every name and the TCP port across an edge restarted on the same port', async () => {
    const range = portRange();
    const startServer = async (port: string) => {
      const server = spawnCli([
        'server',
        '--port',
        port,
        '--tcp-ports',
        range,
        '--json',
        '--log-level',
        'warn',
      ]);
      cleanups.push(async () => {
        server.kill('SIGKILL');
        await server.exited;
      });
      return { server, url: String((await server.waitFor('listening')).url) };
    };
    const first = await startServer('0');
    const edgePort = new URL(first.url).port;
    const web = await labelled('web');
    const api = await labelled('api');
    const hash = await startHashServer();
    cleanups.push(hash.close);
    const config = await file(
      'restart.yml',
      [
        `server: ${first.url}`,
        'tunnels:',
        `  web: { target: ${web}, subdomain: restart-web }`,
        `  api: { target: ${api} }`,
        `  db: { proto: tcp, target: ${hash.port} }`,
      ].join('\n'),
    );
    const agent = startCli(['start', '--all', '--config', config, '--json']);
    const readies = async () => {
      const seen = new Map<unknown, Record<string, unknown>>();
      while (seen.size < 3) {
        const event = await agent.waitFor('ready');
        seen.set(event.tunnel, event);
        agent.events.splice(agent.events.indexOf(event), 1);
      }
      return seen;
    };
    const before = await readies();
    first.server.kill('SIGKILL');
    await first.server.exited;
    await agent.waitFor('reconnecting');
    const second = await startServer(edgePort);
    const after = await readies();
    for (const tunnel of ['web', 'api', 'db']) {
      expect(after.get(tunnel)?.url).toBe(before.get(tunnel)?.url);
    }
    const get = async (name: unknown) => (await fetch(`${second.url}/session/${String(name)}/x`)).text();
    expect(await get('restart-web')).toBe('web /x');
    expect(await get(after.get('api')?.name)).toBe('api /x');
    const { sent, answer } = await sendAndHash(Number(new URL(String(after.get('db')?.url)).port), 4096);
    expect(answer).toBe(sent);
  });

  it('forwards to https:// targets with insecure (self-signed) and ca (a file relative to the config)', async () => {
    const edge = await startEdge();
    const certs = await makeCertificates();
    cleanups.push(() => certs.dispose());
    const selfSigned = await startHttpsBackend(certs.selfSigned);
    cleanups.push(() => selfSigned.close());
    const caSigned = await startHttpsBackend(certs.signed);
    cleanups.push(() => caSigned.close());
    // The CA is named relative to the config file's own folder, not to the working directory.
    await writeFile(join(dir, 'rootCA.pem'), certs.ca.cert);
    const config = await file(
      'tls.yml',
      [
        `server: ${edge.url}`,
        'tunnels:',
        `  dev: { target: "https://localhost:${selfSigned.port}", subdomain: tls-dev, insecure: true }`,
        `  priv: { target: "https://localhost:${caSigned.port}", subdomain: tls-priv, ca: rootCA.pem }`,
      ].join('\n'),
    );
    const agent = startCli(['start', '--all', '--config', config, '--json']);
    for (let ready = 0; ready < 2; ready++) {
      const event = await agent.waitFor('ready');
      agent.events.splice(agent.events.indexOf(event), 1);
    }
    const dev = await fetch(`${edge.url}/session/tls-dev/hello`);
    expect(dev.status).toBe(200);
    expect(selfSigned.seen.map((seen) => seen.url)).toEqual(['/hello']);
    const priv = await fetch(`${edge.url}/session/tls-priv/there`);
    expect(priv.status).toBe(200);
    expect(caSigned.seen.map((seen) => seen.url)).toEqual(['/there']);
  });

  it('a replica tunnel from the file follows the live count (--json `replicas` events, labelled)', async () => {
    const edge = buildEdge({ port: 0, logger: silent, auth: { tokens: ['replica-token'] } });
    await edge.listen();
    cleanups.push(() => edge.close(0));
    const web = await labelled('web');
    const config = await file(
      'replica.yml',
      [
        `server: ${edge.url}`,
        'token: replica-token',
        'tunnels:',
        `  web: { target: ${web}, subdomain: live-count, replica: true }`,
      ].join('\n'),
    );
    const agent = startCli(['start', '--all', '--config', config, '--json']);
    expect(await agent.waitFor('ready')).toMatchObject({ tunnel: 'web', replicas: 1 });
    const other = await connect({
      target: web,
      server: edge.url,
      subdomain: 'live-count',
      token: 'replica-token',
      replica: true,
      inspect: false,
    });
    cleanups.push(() => other.close(0));
    expect(await agent.waitFor('replicas')).toMatchObject({ tunnel: 'web', replicas: 2 });
  });

  it('takes the server from flag over env over file', async () => {
    const edge = await startEdge();
    const web = await labelled('web');
    const dead = `http://127.0.0.1:${await freePort()}`;
    const config = await file('precedence.yml', `server: ${dead}\ntunnels:\n  web: { target: ${web} }\n`);
    const byEnv = startCli(['start', 'web', '--config', config, '--json'], { TUNNEL2_SERVER: edge.url });
    expect((await byEnv.waitFor('ready')).tunnel).toBe('web');
    const byFlag = startCli(['start', 'web', '--config', config, '--server', edge.url, '--json'], {
      TUNNEL2_SERVER: dead,
    });
    expect((await byFlag.waitFor('ready')).tunnel).toBe('web');
  });
});

describe('tunnel2 start: a file or command line it cannot use exits 2 with one line', () => {
  const cases: [string, string, string[], RegExp][] = [
    [
      'bad target',
      'tunnels:\n  api: { target: abc }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.api\.target: expected a port, host:port or URL, got "abc"$/,
    ],
    [
      'unknown key',
      'tunnels:\n  api: { target: 3000, subdomian: x }\n',
      ['--all'],
      /tunnels\.api\.subdomian: unknown key \(allowed here: proto, target, /,
    ],
    [
      'unknown top key',
      'tunels: {}\n',
      ['--all'],
      /bad\.yml: tunels: unknown key \(allowed here: server, token, tunnels\)$/,
    ],
    [
      'bad proto',
      'tunnels:\n  db: { proto: udp, target: 53 }\n',
      ['--all'],
      /tunnels\.db\.proto: expected http or tcp, got "udp"$/,
    ],
    [
      'tcp-only key on http',
      'tunnels:\n  web: { target: 3000, remote_port: 1 }\n',
      ['--all'],
      /tunnels\.web\.remote_port: unknown key/,
    ],
    [
      'bad allow_ip',
      'tunnels:\n  web: { target: 3000, allow_ip: [10.0.0.0/8, 10.0.0.300] }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.web\.allow_ip: "10\.0\.0\.300" is not an IP address or CIDR block$/,
    ],
    [
      'bad allow_ip prefix on tcp',
      'tunnels:\n  db: { proto: tcp, target: 5432, allow_ip: "::1/129" }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.db\.allow_ip: "::1\/129" is not an IP address or CIDR block$/,
    ],
    [
      'bad basic_auth',
      'tunnels:\n  web: { target: 3000, basic_auth: "nopassword" }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.web\.basic_auth: expected user:password \(both non-empty\)$/,
    ],
    [
      'insecure on an http target',
      'tunnels:\n  web: { target: 3000, insecure: true }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.web\.insecure: applies to https:\/\/ targets only \(the target is "3000"\)$/,
    ],
    [
      'ca file missing',
      'tunnels:\n  web: { target: "https://localhost:8443", ca: no-such-ca.pem }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.web\.ca: "no-such-ca\.pem": cannot read it \(ENOENT\)$/,
    ],
    [
      'ca file not PEM',
      'tunnels:\n  web: { target: "https://localhost:8443", ca: bad.yml }\n',
      ['--all'],
      /^tunnel2: bad\.yml: tunnels\.web\.ca: "bad\.yml": no PEM certificate in it/,
    ],
    ['no tunnels', 'server: http://localhost:1\n', ['--all'], /bad\.yml: tunnels: missing/],
    ['not YAML', 'tunnels: [\n', ['--all'], /bad\.yml: not valid YAML/],
    [
      'unknown name',
      'tunnels:\n  web: { target: 3000 }\n',
      ['api'],
      /no tunnel named api in .*bad\.yml \(it defines web\)$/,
    ],
    [
      'no names, no --all',
      'tunnels:\n  web: { target: 3000 }\n',
      [],
      /name the tunnels to start, or use --all \(.*defines web\)$/,
    ],
  ];
  for (const [what, text, args, expected] of cases) {
    it(what, async () => {
      const config = await file('bad.yml', text);
      const result = await cli(['start', ...args, '--config', config]);
      expect(result.code).toBe(2);
      const lines = result.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(expected);
    });
  }

  it('--json: the same error as an event on stdout, fatal', async () => {
    const config = await file('bad.yml', 'tunnels:\n  api: { target: abc }\n');
    const result = await cli(['start', '--all', '--config', config, '--json']);
    expect(result.code).toBe(2);
    const events = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(events).toEqual([
      expect.objectContaining({
        event: 'error',
        code: 'TUNNEL2_ERR_INVALID_CONFIG',
        message: 'bad.yml: tunnels.api.target: expected a port, host:port or URL, got "abc"',
        fatal: true,
      }),
    ]);
  });

  it('a missing file is named by the path given', async () => {
    const result = await cli(['start', '--all', '--config', 'no-such-dir/tunnel2.yml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'tunnel2: no-such-dir/tunnel2.yml: not found (create it, or pass --config <file>)\n',
    );
  });

  it('reads JSON when the file ends in .json', async () => {
    const config = await file('bad.json', JSON.stringify({ tunnels: { web: { target: 'abc' } } }));
    const result = await cli(['start', '--all', '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe(
      'tunnel2: bad.json: tunnels.web.target: expected a port, host:port or URL, got "abc"',
    );
  });
});
