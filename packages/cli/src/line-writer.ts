/** Where the CLI's stdout lines go: `write` for lines to show now, `writeBatched` for one line per request. */
export interface LineOutput {
  /** A line that appears at the end of this event-loop turn (ready, errors, status). */
  write: (line: string) => void;
  /**
   * A line that may wait up to the batch window (one per request). The agent runs in a worker, where each
   * stdout write is a message to the main thread: one per request cost about 20 µs of CPU per request at
   * 1,000 RPS (bench/README.md, optimization log), so request lines go out together, a few times a second.
   */
  writeBatched: (line: string) => void;
  /** Writes everything pending now (before exit). */
  flush: () => void;
}

export interface LineWriterOptions {
  /** Longest a batched line waits. */
  batchMs?: number;
  /** Pending text that is written at once, whatever the window. */
  maxPendingChars?: number;
}

/** Coalesces output lines into few writes (stdout to a file or pipe is a synchronous syscall in Node). */
export function createLineWriter(stream: NodeJS.WritableStream, options: LineWriterOptions = {}): LineOutput {
  const batchMs = options.batchMs ?? 50;
  const maxPendingChars = options.maxPendingChars ?? 64 * 1024;
  let pending = '';
  let immediate: NodeJS.Immediate | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    if (immediate !== undefined) clearImmediate(immediate);
    if (timer !== undefined) clearTimeout(timer);
    immediate = undefined;
    timer = undefined;
    if (pending === '') return;
    const text = pending;
    pending = '';
    stream.write(text);
  };
  return {
    write(line) {
      pending += line;
      immediate ??= setImmediate(flush);
    },
    writeBatched(line) {
      pending += line;
      if (pending.length >= maxPendingChars) flush();
      else if (immediate === undefined) timer ??= setTimeout(flush, batchMs);
    },
    flush,
  };
}
