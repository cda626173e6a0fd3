import { ServiceError, ServiceErrorCode } from './errors.js';
import { freePort } from './free-port.js';
import { failStart, findBinary, type NativeProcess, spawnNative, stopProcess } from './native-process.js';
import { answersPing, readRedisInfo } from './redis-info.js';

/**
 * A real, throwaway `redis-server` (the Debian package): loopback only, a free port, no persistence. Its
 * owner disposes of it; `stop()` and `start()` again on the same port let a test take Redis away and bring
 * it back (the registry must recover without being rebuilt).
 */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** The running process's pid (a new one after a restart); 0 while stopped. */
  readonly pid: number;
  /** Starts (or restarts) the server on the same port; resolves once it answers PING. */
  start(): Promise<void>;
  /** Stops the server (SIGTERM) and waits for the process to exit; idempotent. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: for an exit handler that cannot wait. */
  kill(): void;
  /** Every `key:value` line of `INFO all`. */
  info(): Promise<Map<string, string>>;
}

export interface RedisServerOptions {
  /** The port to use; default a free one. */
  port?: number;
  /** More redis-server arguments, given the chosen port (e.g. cluster mode and its per-port config file). */
  extraArgs?: (port: number) => string[];
  /** How long a fresh redis-server may take to print its ready line (it usually takes a few ms). */
  readyTimeoutMs?: number;
}

const REDIS_SERVER_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];
const READY_TIMEOUT_MS = 10_000;
const READY_LINE = 'Ready to accept connections';

/** Resolves on the server's own ready line (an event, not a polling loop); rejects on exit or timeout. */
function readyLine(proc: NativeProcess, port: number, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new ServiceError(ServiceErrorCode.START, `redis-server did not get ready on port ${port}`));
    }, timeoutMs);
    proc.onOutput((all) => {
      if (!all.includes(READY_LINE)) return;
      clearTimeout(timer);
      resolve();
    });
    void proc.exited.then(() => {
      clearTimeout(timer);
      reject(new ServiceError(ServiceErrorCode.START, `redis-server exited with ${proc.child.exitCode}`));
    });
  });
}

export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = findBinary(REDIS_SERVER_CANDIDATES, 'redis-server');
  const port = options.port ?? (await freePort());
  let proc: NativeProcess | undefined;

  const start = async (): Promise<void> => {
    if (proc !== undefined) return;
    const started = spawnNative(binary, [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      ...(options.extraArgs?.(port) ?? []),
    ]);
    try {
      await readyLine(started, port, options.readyTimeoutMs ?? READY_TIMEOUT_MS);
    } catch (err) {
      const why = err instanceof Error ? err.message : 'redis-server did not start';
      return failStart(started, why, err);
    }
    if (!(await answersPing(port)))
      return failStart(started, `redis-server on port ${port} does not answer PING`);
    proc = started;
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return proc?.child.pid ?? 0;
    },
    start,
    async stop() {
      const running = proc;
      proc = undefined;
      if (running !== undefined) await stopProcess(running);
    },
    kill() {
      proc?.child.kill('SIGKILL');
    },
    info: () => readRedisInfo(port),
  };
}
