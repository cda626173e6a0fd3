import { isMainThread, parentPort, workerData } from 'node:worker_threads';

export interface TerminalSize {
  columns: number;
  rows: number;
}

/** The terminal stdout writes to: its size now, and word when it changes. */
export interface Terminal {
  size(): TerminalSize;
  /** Calls `listener` after each resize; returns a function that stops listening. */
  onResize(listener: () => void): () => void;
}

/** What the bin hands its worker (stdout's terminal is the main thread's: a worker's stdout is a pipe). */
interface TerminalWorkerData {
  stdoutTerminal?: TerminalSize;
}

/** A pty whose size was never set reports 0 x 0 (`script`, some CI runners): assume the classic screen. */
function sized(columns: number | undefined, rows: number | undefined): TerminalSize {
  return { columns: columns || 80, rows: rows || 24 };
}

/**
 * stdout's terminal, or undefined when stdout is not one (a pipe, a file) or cannot move a cursor
 * (`TERM=dumb`). In the bin's worker the answer and the resizes come from the main thread.
 */
export function stdoutTerminal(env: NodeJS.ProcessEnv = process.env): Terminal | undefined {
  if (env.TERM === 'dumb') return undefined;
  if (isMainThread || parentPort === null) {
    const stdout = process.stdout;
    if (!stdout.isTTY) return undefined;
    return {
      size: () => sized(stdout.columns, stdout.rows),
      onResize(listener) {
        stdout.on('resize', listener);
        return () => void stdout.off('resize', listener);
      },
    };
  }
  const given = (workerData as TerminalWorkerData | null)?.stdoutTerminal;
  if (given === undefined) return undefined;
  const port = parentPort;
  let size = sized(given.columns, given.rows);
  return {
    size: () => size,
    onResize(listener) {
      const handler = (message: unknown): void => {
        const m = message as { type?: unknown; columns?: unknown; rows?: unknown } | null;
        if (m === null || typeof m !== 'object' || m.type !== 'resize') return;
        size = sized(Number(m.columns) || undefined, Number(m.rows) || undefined);
        listener();
      };
      port.on('message', handler);
      return () => {
        port.off('message', handler);
        // A listener refs the port; the worker must still be free to exit once the tunnel is closed.
        port.unref();
      };
    },
  };
}

/** What of a tty.WriteStream's libuv handle unblockStdoutTerminal uses (not in Node's public types). */
interface TtyHandle {
  fd?: number;
  setBlocking?: (blocking: boolean) => number;
}

/**
 * Node writes to a terminal synchronously (tty.WriteStream makes its handle blocking), so a terminal that
 * stops reading (a frozen emulator, Ctrl-S) would stop the agent's event loop, and every request through
 * the tunnel with it. libuv opened the terminal again for this process alone (its fd is then not 1), so its
 * writes can be made asynchronous without touching the shell's: stdout then has backpressure like a pipe,
 * which the line writer honours. A terminal libuv could not reopen stays as it is.
 */
export function unblockStdoutTerminal(): void {
  if (!isMainThread || !process.stdout.isTTY) return;
  const handle = (process.stdout as unknown as { _handle?: TtyHandle })._handle;
  if (handle?.fd === undefined || handle.fd === 1) return;
  handle.setBlocking?.(false);
}
