import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@tunnel2/test-services';

/** A throwaway PostgreSQL on a free loopback port, trust auth, no fsync, in a temp dir. */
export interface TestPostgres {
  readonly port: number;
  stop(): Promise<void>;
}

export interface TestPostgresOptions {
  /** The port to use; default a free one. */
  port?: number;
  /** Where its temp dir goes; default the OS's. */
  parentDir?: string;
  /** More `postgres` arguments (e.g. `-c name=value`). */
  extraArgs?: string[];
  readyTimeoutMs?: number;
}

const READY_TIMEOUT_MS = 30_000;

function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const bin = versions.map((v) => join(root, v, 'bin')).find((dir) => existsSync(join(dir, 'initdb')));
  if (bin === undefined) {
    throw new Error(
      'PostgreSQL is not installed: the TCP tunnel tests run psql against a real server. ' +
        'Install it with `apt-get install -y postgresql postgresql-client` (.ci/run does it).',
    );
  }
  return bin;
}

/** PostgreSQL refuses to run as root: as root, run it as the `postgres` user (Debian's package creates it). */
function asServerUser(argv: string[]): string[] {
  return process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', ...argv] : argv;
}

/** The server's own pid, once it has written it (runuser may not pass signals on). */
function postmasterPid(data: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(options.parentDir ?? tmpdir(), 'tunnel2-pg-'));
  const data = join(dir, 'data');
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> = Promise.resolve();
  /** Stops the server with `sig` (SIGINT: fast shutdown; SIGKILL: a failed start), then removes the dir. */
  const shutdown = async (sig: NodeJS.Signals): Promise<void> => {
    const pid = postmasterPid(data);
    if (pid !== undefined) signal(pid, sig);
    // Before the server wrote its pid only its launcher is known: runuser passes SIGTERM on to the server
    // (SIGKILL would orphan it), and kills it itself if it has not ended a few seconds later.
    else if (child !== undefined && child.exitCode === null && child.signalCode === null)
      child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (process.getuid?.() === 0) {
      const uid = Number(spawnSync('id', ['-u', 'postgres']).stdout.toString().trim());
      const gid = Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim());
      chownSync(dir, uid, gid);
    }
    const [initCommand, ...initArgs] = asServerUser([
      join(bin, 'initdb'),
      '-D',
      data,
      '-A',
      'trust',
      '-U',
      'postgres',
      '--no-sync',
    ]);
    const init = spawnSync(initCommand!, initArgs, { encoding: 'utf8' });
    if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
    const port = options.port ?? (await freePort());
    const [command, ...args] = asServerUser([
      join(bin, 'postgres'),
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      ...(options.extraArgs ?? []),
    ]);
    const proc = spawn(command!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', resolve));
    // Waits for the server's own "ready" line, bounded in time; a server that exits first fails at once.
    await new Promise<void>((resolve, reject) => {
      let output = '';
      const timer = setTimeout(
        () => reject(new Error(`postgres not ready: ${output}`)),
        options.readyTimeoutMs ?? READY_TIMEOUT_MS,
      );
      const onData = (chunk: Buffer): void => {
        if (output.length < 16_384) output += chunk.toString();
        if (output.includes('ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stderr?.on('data', onData);
      proc.stdout?.on('data', onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`postgres exited: ${output}`));
      });
    });
    return { port, stop: () => shutdown('SIGINT') };
  } catch (err) {
    await shutdown('SIGKILL');
    throw err;
  }
}
