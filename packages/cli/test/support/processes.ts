import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { withOwnConfigHome } from './config-home.js';

export const cliBin = fileURLToPath(new URL('../../bin/tunnel2.js', import.meta.url));

export interface Spawned {
  child: ChildProcess;
  /** Every stdout line parsed as JSON, in order. */
  events: Record<string, unknown>[];
  stderr: () => string;
  /** Resolves with the first event named `name` (or rejects if the process exits first). */
  waitFor(name: string): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): void;
}

/** Runs the real CLI (`bin/tunnel2.js`) with `--json` output. */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}): Spawned {
  return spawnNode([cliBin, ...args], env);
}

/** `tunnel2 server` as a process a test can kill and start again on the same `port` (default: a free one). */
export async function startEdgeProcess(port = '0'): Promise<{ edge: Spawned; url: string; port: string }> {
  const edge = spawnCli(['server', '--port', port, '--json', '--log-level', 'warn']);
  try {
    const url = String((await edge.waitFor('listening')).url);
    return { edge, url, port: new URL(url).port };
  } catch (err) {
    edge.kill('SIGKILL');
    throw err;
  }
}

/** Runs a Node script whose stdout is one JSON event per line (the CLI's `--json`, a test's helper process). */
export function spawnNode(argv: string[], env: NodeJS.ProcessEnv = {}): Spawned {
  const home = withOwnConfigHome(env);
  const child = spawn(process.execPath, argv, {
    env: { ...process.env, ...home.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.once('close', home.cleanup);
  const events: Record<string, unknown>[] = [];
  const waiters: {
    name: string;
    resolve: (e: Record<string, unknown>) => void;
    reject: (e: Error) => void;
  }[] = [];
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(line) as Record<string, unknown>;
    } catch {
      event = { event: 'text', line };
    }
    events.push(event);
    for (const waiter of waiters.filter((w) => w.name === event.event)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(event);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  void exited.then(() => {
    for (const waiter of waiters.splice(0)) {
      waiter.reject(new Error(`process exited before "${waiter.name}"; stderr: ${stderr}`));
    }
  });
  return {
    child,
    events,
    stderr: () => stderr,
    waitFor(name) {
      const seen = events.find((e) => e.event === name);
      if (seen) return Promise.resolve(seen);
      if (child.exitCode !== null)
        return Promise.reject(new Error(`process already exited; stderr: ${stderr}`));
      return new Promise((resolve, reject) => waiters.push({ name, resolve, reject }));
    },
    exited,
    kill(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
    },
  };
}

/** Current resident set size of a process (VmRSS), in bytes. */
export function currentRss(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/** Peak resident set size of a process (VmHWM), in bytes. */
export function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmHWM:\s+(\d+) kB/.exec(status);
  if (!match) throw new Error(`no VmHWM for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/**
 * Reads like a slow client: stops every 16 MiB long enough for every buffer upstream to fill. Resolves
 * with the bytes read at 'end' (when `complete()` says the stream really finished), rejects on error.
 */
export function readInBursts(
  stream: NodeJS.ReadableStream,
  complete: () => boolean = () => true,
): Promise<number> {
  return new Promise((resolve, reject) => {
    let total = 0;
    let sincePause = 0;
    stream.on('data', (chunk: Buffer) => {
      total += chunk.length;
      sincePause += chunk.length;
      if (sincePause >= 16 * 1024 * 1024) {
        sincePause = 0;
        stream.pause();
        setTimeout(() => stream.resume(), 40);
      }
    });
    stream.on('end', () => (complete() ? resolve(total) : reject(new Error('incomplete'))));
    stream.on('error', reject);
  });
}

/** Runs the CLI to completion and returns its exit code and output. */
export function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const home = withOwnConfigHome(env);
    const child = spawn(process.execPath, [cliBin, ...args], {
      env: { ...process.env, ...home.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.once('close', home.cleanup);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('exit', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}
