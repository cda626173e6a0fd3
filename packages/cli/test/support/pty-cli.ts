import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { findCommand } from '@tunnel2/test-services';
import { withOwnConfigHome } from './config-home.js';
import { cliBin } from './processes.js';
import { VirtualTerminal } from './virtual-terminal.js';

const ptyRun = fileURLToPath(new URL('./pty-run.py', import.meta.url));

export interface PtyCli {
  /** Everything the CLI wrote to the terminal, escapes included. */
  raw(): string;
  terminal: VirtualTerminal;
  /** Resolves once `test(screen lines)` holds (checked after each output chunk); rejects if the CLI exits first. */
  waitForScreen(test: (lines: string[]) => boolean, what: string): Promise<string[]>;
  resize(columns: number, rows: number): void;
  signal(name: 'INT' | 'TERM' | 'KILL'): void;
  /** Types Ctrl-C: the terminal echoes `^C` and sends SIGINT, as for a user at the keyboard. */
  ctrlC(): void;
  /** Stops reading the terminal (its output stalls in the kernel, as in a frozen emulator), or reads again. */
  pause(): void;
  resume(): void;
  exited: Promise<number | null>;
  kill(): void;
}

/** Runs the real CLI under a real pseudo-terminal (python3's pty module, test/support/pty-run.py). */
export function ptyCli(
  args: string[],
  options: { columns?: number; rows?: number; env?: NodeJS.ProcessEnv } = {},
): PtyCli {
  const columns = options.columns ?? 100;
  const rows = options.rows ?? 20;
  const home = withOwnConfigHome(options.env ?? {});
  const child = spawn(
    findCommand('python3', 'python3'),
    [ptyRun, String(columns), String(rows), process.execPath, cliBin, ...args],
    {
      env: { ...process.env, TERM: 'xterm-256color', NO_COLOR: '', ...home.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  child.once('close', home.cleanup);
  const terminal = new VirtualTerminal(columns, rows);
  let raw = '';
  let stderr = '';
  const waiters = new Set<() => void>();
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    raw += chunk;
    terminal.feed(chunk);
    for (const check of [...waiters]) check();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // 'close': the exit status once the pty's last bytes were read too.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    raw: () => raw,
    terminal,
    waitForScreen(test, what) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const lines = terminal.lines();
          if (!test(lines)) return;
          waiters.delete(check);
          resolve(lines);
        };
        waiters.add(check);
        check();
        void exited.then(() => {
          if (!waiters.delete(check)) return;
          reject(new Error(`exited before ${what}; screen:\n${terminal.lines().join('\n')}\n${stderr}`));
        });
      });
    },
    resize(c, r) {
      terminal.resize(c, r);
      child.stdin.write(`resize ${c} ${r}\n`);
    },
    signal(name) {
      child.stdin.write(`signal ${name}\n`);
    },
    ctrlC() {
      child.stdin.write('ctrl-c\n');
    },
    pause() {
      child.stdin.write('pause\n');
    },
    resume() {
      child.stdin.write('resume\n');
    },
    exited,
    kill() {
      // Through the helper, which then exits with the CLI: killing the helper would orphan the CLI.
      if (child.exitCode === null && child.stdin.writable) child.stdin.end('signal KILL\n');
    },
  };
}
