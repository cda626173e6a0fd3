import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { Socket } from 'node:net';
import { delimiter, join } from 'node:path';
import { ServiceError, ServiceErrorCode } from './errors.js';

/*
 * Non-Node programs the tests and the bench run for real (Debian's redis-server, HAProxy): found on disk,
 * started with their output kept for the error that says why they did not come up, and stopped by waiting
 * for their exit, so that nothing outlives the test that started it.
 */

/** Bounds on waiting for a process with no "ready" line of its own to accept connections. */
const ACCEPT_ATTEMPTS = 400;
const ACCEPT_PAUSE_MS = 25;
/** What is kept of a process's output for an error message. */
const MAX_OUTPUT = 16_384;

/** The first existing path of `candidates`; else a NOT_INSTALLED error naming the Debian package. */
export function findBinary(candidates: readonly string[], debianPackage: string): string {
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined) {
    throw new ServiceError(
      ServiceErrorCode.NOT_INSTALLED,
      `${debianPackage} is not installed: tunnel2's tests and bench run a real one ` +
        `(apt-get install -y ${debianPackage}; .ci/run does it)`,
    );
  }
  return found;
}

/**
 * A command the tests run by name (psql, redis-cli, python3, openssl, ...): its path on PATH or in the system
 * folders Debian installs to (/usr/sbin is not on every PATH); else a NOT_INSTALLED error naming the Debian
 * package, instead of a bare `spawn psql ENOENT`.
 */
export function findCommand(name: string, debianPackage: string, path = process.env.PATH ?? ''): string {
  const dirs = [
    ...path.split(delimiter).filter((dir) => dir !== ''),
    '/usr/local/bin',
    '/usr/bin',
    '/usr/sbin',
  ];
  return findBinary(
    dirs.map((dir) => join(dir, name)),
    debianPackage,
  );
}

/** A spawned native process, its output (the first 16 KiB) and its exit. */
export interface NativeProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  output(): string;
  /** Called with each chunk of output as it comes (a ready line is an event, not a poll). */
  onOutput(listener: (all: string) => void): void;
}

export function spawnNative(bin: string, args: readonly string[]): NativeProcess {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  let output = '';
  const listeners: ((all: string) => void)[] = [];
  const keep = (text: string): void => {
    if (output.length < MAX_OUTPUT) output += text;
    for (const listener of listeners) listener(output);
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  // A spawn failure (ENOENT, EACCES) also ends in 'exit'; without a listener it would crash the run.
  child.on('error', () => {});
  return { child, exited, output: () => output, onOutput: (listener) => listeners.push(listener) };
}

/** True once a connection to 127.0.0.1:`port` is accepted. */
export async function accepts(port: number): Promise<boolean> {
  const socket = new Socket();
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return true;
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

function running(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Sends `signal` unless the process already ended, and waits for the exit. */
export async function stopProcess(proc: NativeProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (running(proc.child)) proc.child.kill(signal);
  await proc.exited;
}

/**
 * Kills a process that failed to come up (SIGKILL, wait for the exit) and throws START with what it printed:
 * a failed start leaves no process behind.
 */
export async function failStart(proc: NativeProcess, why: string, cause?: unknown): Promise<never> {
  await stopProcess(proc, 'SIGKILL');
  const output = proc.output().trim();
  throw new ServiceError(ServiceErrorCode.START, output === '' ? why : `${why}: ${output}`, { cause });
}

/** Spawns a program without a ready line and waits (bounded) until `port` accepts; killed if it never does. */
export async function spawnListening(
  name: string,
  bin: string,
  args: readonly string[],
  port: number,
): Promise<NativeProcess> {
  const proc = spawnNative(bin, args);
  for (let attempt = 0; attempt < ACCEPT_ATTEMPTS; attempt++) {
    if (!running(proc.child)) return failStart(proc, `${name} exited with ${String(proc.child.exitCode)}`);
    if (await accepts(port)) return proc;
    await new Promise((resolve) => setTimeout(resolve, ACCEPT_PAUSE_MS));
  }
  return failStart(proc, `${name} did not listen on ${port}`);
}
