import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { BenchError, BenchErrorCode } from './errors.js';

/*
 * Non-Node processes the benches run for real (Debian's redis-server and HAProxy): found on disk, started
 * on a free loopback port and awaited until that port accepts. Neither prints a ready line we rely on.
 */

/** Bounds on waiting for a native process to accept connections. */
const READY_ATTEMPTS = 400;
const READY_PAUSE_MS = 25;

/** The first existing path of `candidates`; else a STACK error naming the Debian package to install. */
export function findBinary(candidates: readonly string[], pkg: string): string {
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined) {
    throw new BenchError(
      BenchErrorCode.STACK,
      `${pkg} is not installed: this bench runs a real one (apt-get install -y ${pkg})`,
    );
  }
  return found;
}

/** A loopback port that was free a moment ago (for processes that must be told their port up front). */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function accepts(port: number): Promise<boolean> {
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

/** Spawns a non-Node process and waits (bounded) until its port accepts; its output is kept for errors. */
export async function spawnListening(
  name: string,
  bin: string,
  args: string[],
  port: number,
): Promise<ChildProcess> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (t: string): void => {
    if (output.length < 16_384) output += t;
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  for (let attempt = 0; attempt < READY_ATTEMPTS; attempt++) {
    if (child.exitCode !== null) break;
    if (await accepts(port)) return child;
    await new Promise((resolve) => setTimeout(resolve, READY_PAUSE_MS));
  }
  child.kill('SIGKILL');
  throw new BenchError(BenchErrorCode.STACK, `${name} did not listen on ${port}: ${output.trim()}`);
}

/** SIGTERM and wait for the exit (nothing to do if it already ended). */
export async function stopNative(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}
