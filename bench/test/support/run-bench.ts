import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The built bench entry, exactly what `pnpm bench` runs. */
export const benchMain = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export interface BenchRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `pnpm bench <args>` (the built entry, in its own process) to its end, with `env` added to its own;
 * `onStderr` sees its stderr so far and its pid after each chunk (to act on the bench mid-run); `onSpawn`
 * gets the process as soon as it starts (to stop it, and its stack, when a test fails or times out).
 */
export function runBench(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  onStderr?: (stderr: string, pid: number) => void,
  onSpawn?: (child: ChildProcess) => void,
): Promise<BenchRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [benchMain, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onSpawn?.(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      onStderr?.(stderr, child.pid!);
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
