import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, Socket } from 'node:net';

/**
 * A real, throwaway `redis-server` for tests: loopback only, a free port, no persistence. Tests own it as a
 * disposable resource; `stop()` and `start()` again on the same port let a test take Redis away and bring
 * it back (the registry must recover without being rebuilt).
 */
export interface TestRedisServer {
  readonly port: number;
  readonly url: string;
  /** Starts (or restarts) the server on the same port; resolves once it answers PING. */
  start(): Promise<void>;
  /** Stops the server and waits for the process to exit; idempotent. */
  stop(): Promise<void>;
}

const REDIS_SERVER_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];
/** How long a fresh redis-server may take to answer PING (it usually takes a few ms). */
const READY_TIMEOUT_MS = 10_000;

function findRedisServer(): string {
  const found = REDIS_SERVER_CANDIDATES.find((path) => existsSync(path));
  if (found === undefined) {
    throw new Error(
      'redis-server is not installed: the Redis registry tests run against a real one. ' +
        'Install it with `apt-get install -y redis-server` (Debian package; .ci/run does it).',
    );
  }
  return found;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

/** One PING over a raw socket (no client library): true on +PONG. */
async function answersPing(port: number): Promise<boolean> {
  const socket = new Socket();
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('PING\r\n');
    const [data] = (await once(socket, 'data')) as [Buffer];
    return data.toString('latin1').startsWith('+PONG');
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

export interface TestRedisServerOptions {
  /** More redis-server arguments, given the chosen port (e.g. cluster mode and its per-port config file). */
  extraArgs?: (port: number) => string[];
}

export async function startTestRedisServer(options: TestRedisServerOptions = {}): Promise<TestRedisServer> {
  const binary = findRedisServer();
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> = Promise.resolve();

  const start = async (): Promise<void> => {
    if (child !== undefined) return;
    const proc = spawn(
      binary,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        ...(options.extraArgs?.(port) ?? []),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    exited = once(proc, 'exit');
    let output = '';
    // Waits for the server's own "ready" line (an event, not a polling loop), bounded in time; a server
    // that exits first (port taken, bad flag) fails at once with what it printed.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`redis-server did not get ready on port ${port}: ${output}`));
      }, READY_TIMEOUT_MS);
      const onData = (chunk: string): void => {
        if (output.length < 16_384) output += chunk;
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout?.setEncoding('utf8').on('data', onData);
      proc.stderr?.setEncoding('utf8').on('data', onData);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${String(code)}: ${output}`));
      });
    });
    if (!(await answersPing(port))) throw new Error(`redis-server on port ${port} does not answer PING`);
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    if (proc === undefined) return;
    child = undefined;
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
  };

  await start();
  return { port, url: `redis://127.0.0.1:${port}`, start, stop };
}
