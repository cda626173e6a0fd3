import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { BenchError, BenchErrorCode } from '../errors.js';

/** One process of the stack under test (backend, edge, agent), started from its real command line. */
export interface ChildService {
  readonly name: string;
  readonly pid: number;
  /** What the process printed when it became ready (its first line accepted by `ready`). */
  readonly readyValue: string;
  /** Counts stdout lines after ready; the agent prints one per request. */
  readonly lines: { total: number; withError: number };
  /** The last part of stderr, to explain a failure. */
  stderrTail(): string;
  /** True while the process runs. */
  alive(): boolean;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL now, synchronously: for the bench's own exit, so no child outlives it. */
  kill(): void;
}

export interface ChildServiceOptions {
  name: string;
  args: string[];
  /** Returns the ready value when a stdout line says the process is ready, else undefined. */
  ready: (line: string) => string | undefined;
  /** How long to wait for the ready line. */
  startTimeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

const STDERR_TAIL = 4096;

/** Spawns `node <args>` and resolves once it printed its ready line; rejects with its stderr if it dies first. */
export function startChildService(options: ChildServiceOptions): Promise<ChildService> {
  const child: ChildProcess = spawn(process.execPath, options.args, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = { total: 0, withError: 0 };

  return new Promise<ChildService>((resolve, reject) => {
    let readyValue: string | undefined;
    const fail = (why: string, cause?: unknown): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(
        new BenchError(
          BenchErrorCode.STACK,
          `${options.name} ${why}${stderr ? `; stderr: ${stderr.trim()}` : ''}`,
          {
            cause,
          },
        ),
      );
    };
    const timeoutMs = options.startTimeoutMs ?? 15_000;
    const timer = setTimeout(() => fail(`printed no ready line within ${timeoutMs} ms`), timeoutMs);
    child.once('error', (err) => fail('could not be started', err));
    child.once('exit', (code, signal) => {
      if (readyValue === undefined) fail(`exited before it was ready (code ${code}, signal ${signal})`);
    });

    // The stdout of a long-running child must always be drained, or the pipe fills and the child stalls
    // writing its per-request lines: that would measure the pipe, not the tunnel.
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (readyValue !== undefined) {
        lines.total += 1;
        if (line.includes('"error"')) lines.withError += 1;
        return;
      }
      const value = options.ready(line);
      if (value === undefined) return;
      readyValue = value;
      clearTimeout(timer);
      resolve({
        name: options.name,
        pid: child.pid!,
        readyValue: value,
        lines,
        stderrTail: () => stderr.trim(),
        alive: () => child.exitCode === null && child.signalCode === null,
        async stop(graceMs = 5_000) {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          await exited;
          clearTimeout(killer);
        },
        kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        },
      });
    });
  });
}
