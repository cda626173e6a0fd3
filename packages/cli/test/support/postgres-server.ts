import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './tcp-stack.js';

/** A throwaway PostgreSQL on a free loopback port, trust auth, no fsync, in a temp dir. */
export interface TestPostgres {
  readonly port: number;
  stop(): Promise<void>;
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

export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), 'tunnel2-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(spawnSync('id', ['-u', 'postgres']).stdout.toString().trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres']).stdout.toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
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
  const port = await freePort();
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
  ]);
  const child: ChildProcess = spawn(command!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // Waits for the server's own "ready" line, bounded in time; a server that exits first fails at once.
  await new Promise<void>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`postgres not ready: ${output}`)), READY_TIMEOUT_MS);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (output.includes('ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`postgres exited: ${output}`));
    });
  });
  return {
    port,
    async stop() {
      // The server's own pid (runuser may not pass signals on): SIGINT is its fast shutdown.
      const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGINT');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
