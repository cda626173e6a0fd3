// A real npm registry for tests and the npx bench: verdaccio on a free loopback port with its storage in a
// temp folder, and `npx` run against it in a process group of its own. No imports of repository TS files
// here: scripts/bench-npx.ts loads this file with plain Node (type stripping).

import { type ChildProcess, execFile, fork, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The environment for npm children: ours without the npm_* variables that a parent npm or pnpm set. */
export function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key)) env[key] = value;
  }
  return {
    ...env,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    npm_config_loglevel: 'error',
    ...extra,
  };
}

/** The registry that verdaccio proxies for everything that is not @tunnel2/*. */
export const UPLINK_REGISTRY = process.env.TUNNEL2_UPLINK_REGISTRY ?? 'https://registry.npmjs.org/';

export interface LocalRegistry {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  /** The temp folder holding the config, storage, log and an npm user config with a publish token. */
  dir: string;
  /** npm `--userconfig` file: registry = this one, with a token that may publish @tunnel2/*. */
  npmrc: string;
  /** `npm publish <tarball>` to this registry. */
  publish(tarball: string, env?: NodeJS.ProcessEnv): Promise<void>;
  /** The last lines of verdaccio's log (for failure messages). */
  log(): Promise<string>;
  /** Stops verdaccio and removes its folder. */
  close(): Promise<void>;
}

function config(dir: string): string {
  // @tunnel2/* lives only here (never proxied, so a public package of that name cannot shadow it); every
  // other package comes through the uplink and is cached in `storage`.
  return `storage: ${join(dir, 'storage')}
auth:
  htpasswd:
    file: ${join(dir, 'htpasswd')}
    max_users: 100
uplinks:
  upstream:
    url: ${UPLINK_REGISTRY}
    timeout: 60s
    max_fails: 5
    fail_timeout: 1s
packages:
  '@tunnel2/*':
    access: $all
    publish: $authenticated
    unpublish: $authenticated
  '**':
    access: $all
    proxy: upstream
web:
  enable: false
log:
  type: file
  path: ${join(dir, 'verdaccio.log')}
  format: json
  level: warn
`;
}

function waitForUrl(child: ChildProcess, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      reject(new Error(`verdaccio did not start within ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    child.once('message', (message: { url?: string }) => {
      clearTimeout(timer);
      if (typeof message.url === 'string') resolve(message.url);
      else reject(new Error(`unexpected message from verdaccio: ${JSON.stringify(message)}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`verdaccio exited (${code ?? signal}) before listening; stderr: ${stderr}`));
    });
  });
}

/**
 * Starts verdaccio (a real npm registry) on a free loopback port, with its storage in a fresh temp folder,
 * and registers a throwaway user so that packages can be published to it.
 */
export async function startLocalRegistry(options: { startTimeoutMs?: number } = {}): Promise<LocalRegistry> {
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-registry-'));
  const configPath = join(dir, 'config.yaml');
  await writeFile(configPath, config(dir));
  const child = fork(fileURLToPath(new URL('./verdaccio-server.ts', import.meta.url)), [configPath], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    execArgv: [],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const url = await waitForUrl(child, options.startTimeoutMs ?? 30_000);
    // A throwaway account (what `npm adduser` does): its token may publish @tunnel2/*.
    const res = await fetch(new URL('-/user/org.couchdb.user:tunnel2-test', url), {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'tunnel2-test', password: 'tunnel2-test-password' }),
    });
    const body = (await res.json()) as { token?: string };
    if (!res.ok || typeof body.token !== 'string') {
      throw new Error(`verdaccio refused the test user: ${res.status} ${JSON.stringify(body)}`);
    }
    const npmrc = join(dir, 'npmrc');
    await writeFile(npmrc, `registry=${url}\n//${new URL(url).host}/:_authToken=${body.token}\n`);
    const log = async (): Promise<string> =>
      (await readFile(join(dir, 'verdaccio.log'), 'utf8').catch(() => '')).split('\n').slice(-20).join('\n');
    return {
      url,
      dir,
      npmrc,
      log,
      async publish(tarball, env = npmEnv()) {
        try {
          const args = ['publish', tarball, '--userconfig', npmrc, '--registry', url, '--tag', 'latest'];
          await run('npm', args, { env });
        } catch (err) {
          const e = err as Error & { stderr?: string };
          throw new Error(`npm publish ${tarball} failed: ${e.stderr ?? e.message}\n${await log()}`);
        }
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface NpxOptions {
  /** Registry URL (`--registry`). */
  registry: string;
  /** npm cache folder (`--cache`): an empty one makes a cold start. */
  cache: string;
  /** npm user config (`--userconfig`): an empty file keeps the machine's own settings out. */
  userconfig: string;
  /** Working directory: an empty folder, as on a laptop that has never seen the package. */
  cwd: string;
  /** `<package>` and the arguments after it. */
  args: string[];
}

export interface NpxProcess {
  child: ChildProcess;
  /** Every stdout line parsed as JSON (`{ event: 'text', line }` when it is not JSON), in order. */
  events: Record<string, unknown>[];
  /** stdout and stderr so far, for failure messages. */
  output(): string;
  /** The first event named `name`; rejects when the process exits first or after `timeoutMs`. */
  waitFor(name: string, timeoutMs: number): Promise<Record<string, unknown>>;
  /** SIGTERM to the whole process group (npm, the shell and the CLI), SIGKILL after 5 s; resolves on exit. */
  stop(): Promise<void>;
}

/** `npx --yes <package> ...` in its own process group, so that stopping it stops the CLI npm started too. */
export function startNpx(options: NpxOptions): NpxProcess {
  const npmFlags = ['--yes', '--registry', options.registry, '--cache', options.cache];
  const child = spawn('npx', [...npmFlags, '--userconfig', options.userconfig, ...options.args], {
    cwd: options.cwd,
    env: npmEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const events: Record<string, unknown>[] = [];
  const changes = new EventEmitter<{ event: []; closed: [code: number | null] }>();
  let output = '';
  // 'close' comes after the last stdout line, unlike 'exit'.
  const closed = new Promise<void>((resolve) => {
    child.once('close', (code) => {
      changes.emit('closed', code);
      resolve();
    });
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    output += `${line}\n`;
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      event = undefined;
    }
    events.push(typeof event === 'object' && event !== null ? (event as Record<string, unknown>) : { line });
    changes.emit('event');
  });
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // The group is gone already.
    }
  };
  return {
    child,
    events,
    output: () => output,
    waitFor(name, timeoutMs) {
      const find = (): Record<string, unknown> | undefined => events.find((e) => e.event === name);
      const seen = find();
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const done = (): void => {
          clearTimeout(timer);
          changes.off('event', onEvent);
          changes.off('closed', onClosed);
        };
        const onEvent = (): void => {
          const event = find();
          if (event === undefined) return;
          done();
          resolve(event);
        };
        const onClosed = (code: number | null): void => {
          done();
          reject(new Error(`npx exited (${code}) before "${name}":\n${output}`));
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no "${name}" from npx within ${timeoutMs} ms:\n${output}`));
        }, timeoutMs);
        changes.on('event', onEvent);
        changes.on('closed', onClosed);
        if (child.exitCode !== null || child.signalCode !== null) onClosed(child.exitCode);
      });
    },
    async stop() {
      signalGroup('SIGTERM');
      const timer = setTimeout(() => signalGroup('SIGKILL'), 5000);
      await closed;
      clearTimeout(timer);
      // npm may exit before the CLI it started: nothing of the group may outlive the stop.
      signalGroup('SIGKILL');
    },
  };
}
