// The published package, as people meet it: packed by scripts/pack-cli.ts, published to a real registry
// (verdaccio on loopback, storage in a temp folder), then run with `npx` from an empty folder and an empty
// npm cache, and installed into a fresh TypeScript project. Needs the public npm registry only for what
// verdaccio proxies (pino, for the TypeScript project); a registry failure fails the test.

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend, type TestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lintPackage, type PackedCli, packCli } from '../../../scripts/pack-cli.js';
import {
  type LocalRegistry,
  type NpxProcess,
  npmEnv,
  startLocalRegistry,
  startNpx,
} from './support/local-registry.js';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

let work: string;
let packed: PackedCli;
let registry: LocalRegistry;
let backend: TestBackend;
let edge: Edge;
let edgeUrl: string;
let userconfig: string;
let cache: string;
const running: NpxProcess[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'tunnel2-npx-test-'));
  userconfig = join(work, 'empty-npmrc');
  cache = join(work, 'npm-cache');
  await writeFile(userconfig, '');
  packed = await packCli({ tarballDir: work });
  registry = await startLocalRegistry();
  await registry.publish(packed.tarball);
  backend = await createTestBackend();
  edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
  edgeUrl = (await edge.listen()).url;
}, 120_000);

afterAll(async () => {
  await Promise.all(running.map((npx) => npx.stop()));
  await edge?.close(0);
  await backend?.close();
  await registry?.close();
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

/** `npx --yes <package> ...args` from a new folder, empty but for `files`, against the local registry. */
async function npx(args: string[], files: Record<string, string> = {}): Promise<NpxProcess> {
  const cwd = await mkdtemp(join(work, 'cwd-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(cwd, name), text);
  const child = startNpx({ registry: registry.url, cache, userconfig, cwd, args: [packed.name, ...args] });
  running.push(child);
  return child;
}

async function ping(base: string, name: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}/session/${name}/loadtest/ping`);
  return { status: res.status, body: await res.text() };
}

describe('the published @tunnel2/cli', () => {
  it('holds the bundle, its declarations, README, LICENSE and notices, and has no dependencies', async () => {
    for (const file of packed.files) {
      expect(file).toMatch(
        /^(package\.json|README\.md|LICENSE|THIRD-PARTY-NOTICES\.md|tunnel2\.schema\.json|bin\/(tunnel2|check-node|young-generation|optimizing-compiler|malloc-arenas)\.js|dist\/[\w-]+\.(js|d\.ts)|static\/[\w.-]+)$/,
      );
    }
    expect(packed.files).toEqual(
      expect.arrayContaining(['dist/index.d.ts', 'dist/index.js', 'dist/main.js', 'tunnel2.schema.json']),
    );
    const manifest = JSON.parse(await readFile(join(packed.dir, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(manifest).toMatchObject({
      name: '@tunnel2/cli',
      type: 'module',
      bin: { tunnel2: './bin/tunnel2.js' },
      engines: { node: '>=22.19' },
    });
    expect(manifest.dependencies).toBeUndefined();
    expect(packed.bundled.some((id) => id.startsWith('fastify@'))).toBe(true);
    // `tunnel2 start` reads YAML with the bundled parser.
    expect(packed.bundled.some((id) => id.startsWith('yaml@'))).toBe(true);
    expect(manifest.exports).toMatchObject({ './tunnel2.schema.json': './tunnel2.schema.json' });
  });

  it('passes publint and @arethetypeswrong/cli', async () => {
    expect(await lintPackage(packed)).toEqual([]);
  }, 60_000);

  it('runs with npx from an empty folder and an empty npm cache, and tunnels a request', async () => {
    const agent = await npx(['http', String(backend.port), '--server', edgeUrl, '--json']);
    const ready = await agent.waitFor('ready', 90_000);
    expect(ready.url).toMatch(/^http:\/\/[a-z0-9]+\.localhost:\d+\/$/);
    expect(await ping(edgeUrl, String(ready.name))).toEqual({ status: 200, body: 'pong' });
    expect(await agent.waitFor('request', 10_000)).toMatchObject({ path: '/loadtest/ping', status: 200 });
    // The inspector's page ships in the package and is served from it.
    expect(ready.inspectorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/?$/);
    const page = await fetch(String(ready.inspectorUrl));
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/<html/i);
    await agent.stop();
    // npx installed one package: nothing else was resolved or downloaded.
    const [hash] = await readdir(join(cache, '_npx'));
    const installed = await readdir(join(cache, '_npx', hash!, 'node_modules'));
    expect(installed.filter((name) => !name.startsWith('.'))).toEqual(['@tunnel2']);
  }, 120_000);

  it('runs tunnel2 start --all from a folder holding tunnel2.yml', async () => {
    const agent = await npx(['start', '--all', '--json'], {
      'tunnel2.yml': `server: ${edgeUrl}\ntunnels:\n  web: { target: ${backend.port}, subdomain: npxstart }\n`,
    });
    const ready = await agent.waitFor('ready', 90_000);
    expect(ready).toMatchObject({ tunnel: 'web', name: 'npxstart' });
    expect(await ping(edgeUrl, 'npxstart')).toEqual({ status: 200, body: 'pong' });
    expect(await agent.waitFor('request', 10_000)).toMatchObject({ tunnel: 'web', status: 200 });
    await agent.stop();
  }, 120_000);

  it('answers --version, --help and http --help (with examples)', async () => {
    const npxRun = async (args: string[]): Promise<string> => {
      const flags = ['--yes', '--registry', registry.url, '--cache', cache, '--userconfig', userconfig];
      const { stdout } = await run('npx', [...flags, packed.name, ...args], { cwd: work, env: npmEnv() });
      return stdout;
    };
    expect((await npxRun(['--version'])).trim()).toBe(packed.version);
    const help = await npxRun(['--help']);
    for (const command of ['http [options] <target>', 'server [options]', 'token [options]']) {
      expect(help).toContain(command);
    }
    const httpHelp = await npxRun(['http', '--help']);
    expect(httpHelp).toContain('--server <url>');
    expect(httpHelp).toMatch(/Examples:\n\s+\$ tunnel2 http 3000/);
  }, 60_000);

  it('runs the edge too: tunnel2 server from the package, an agent through it', async () => {
    const server = await npx(['server', '--port', '0', '--json', '--log-level', 'warn']);
    const listening = await server.waitFor('listening', 60_000);
    const url = String(listening.url);
    const agent = await npx([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'npxapp',
      '--json',
    ]);
    await agent.waitFor('ready', 60_000);
    expect(await ping(url, 'npxapp')).toEqual({ status: 200, body: 'pong' });
    await agent.stop();
    await server.stop();
  }, 120_000);

  it('installs into a TypeScript project: `import { connect }` type-checks and tunnels a request', async () => {
    const project = join(work, 'consumer');
    await mkdir(project);
    await writeFile(
      join(project, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
    await writeFile(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2023',
          lib: ['es2023'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          // @types/node from this repository, as a project would have its own.
          typeRoots: [join(require.resolve('@types/node/package.json'), '..', '..')],
        },
        files: ['index.ts'],
      }),
    );
    await writeFile(
      join(project, 'index.ts'),
      `import { AgentError, type ConnectOptions, connect, type RequestReport, type Tunnel } from '@tunnel2/cli';
import { pino } from 'pino';

const [server = '', port = ''] = process.argv.slice(2);
const options: ConnectOptions = { target: Number(port), server, logger: pino({ level: 'warn' }) };
// @ts-expect-error the target is a port, host:port or URL
const wrong: ConnectOptions = { target: true };
void wrong;
const tunnel: Tunnel = await connect(options);
const reports: RequestReport[] = [];
tunnel.on('request', (report) => reports.push(report));
tunnel.on('error', (err: AgentError) => console.error(err.code));
const res = await fetch(\`\${server}/session/\${tunnel.info?.name ?? ''}/loadtest/ping\`);
const body = await res.text();
await tunnel.close();
console.log(JSON.stringify({ status: res.status, body, url: tunnel.url, isError: new AgentError('TUNNEL2_ERR_CLOSED', 'x') instanceof Error }));
`,
    );
    const npm = ['--registry', registry.url, '--cache', cache, '--userconfig', userconfig];
    await run('npm', ['install', packed.tarball, 'pino@^10', ...npm], { cwd: project, env: npmEnv() }).catch(
      async (err: Error & { stderr?: string }) => {
        throw new Error(`npm install failed: ${err.stderr ?? err.message}\n${await registry.log()}`);
      },
    );
    await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', project]).catch(
      (err: Error & { stdout?: string }) => {
        throw new Error(`tsc: ${err.stdout ?? err.message}`);
      },
    );
    const { stdout } = await run(process.execPath, ['index.ts', edgeUrl, String(backend.port)], {
      cwd: project,
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toMatchObject({ status: 200, body: 'pong', isError: true });
  }, 120_000);
});
