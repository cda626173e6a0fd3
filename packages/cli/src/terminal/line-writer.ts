/** Where the CLI's stdout lines go: `write` for lines to show now, `writeBatched` for one line per request. */
export interface LineOutput {
  /** A line that appears at the end of this event-loop turn (ready, errors, status). */
  write: (line: string) => void;
  /**
   * A line that may wait up to the batch window (one per request). Each stdout write is a system call that
   * wakes the reader (in the bin's worker, `TUNNEL2_WORKER=1`, a message to the main thread: one per request
   * cost about 20 µs of CPU per request at 1,000 RPS, bench/README.md, optimization log), so request lines go
   * out together, a few times a second.
   */
  writeBatched: (line: string) => void;
  /** Writes everything pending now (before exit). */
  flush: () => void;
}

/** stdout's line writer: also told when stdout's reader went away, and how much it holds (for tests). */
export interface LineWriter extends LineOutput {
  /**
   * stdout's reader went away (`code`: EPIPE): nothing more is written, and `warn` says so once. The
   * tunnel goes on serving; only its lines stop.
   */
  close(code: string): void;
  /** Characters waiting to be written (bounded by maxPendingChars + maxHeldChars while stdout is full). */
  readonly pendingChars: number;
  /** Lines dropped since stdout last drained (said with `droppedLine` when it drains). */
  readonly dropped: number;
}

export interface LineWriterOptions {
  /** Longest a batched line waits. */
  batchMs?: number;
  /**
   * Pending request lines that are written at once, whatever the window; while stdout does not drain, the
   * most of them held: further ones are dropped and counted.
   */
  maxPendingChars?: number;
  /**
   * The other lines (ready, errors, closed, status) held while stdout does not drain: bounded apart, so
   * that a flood of request lines never pushes them out.
   */
  maxHeldChars?: number;
  /** The line that says how many lines were dropped, written when stdout drains again. */
  droppedLine?: (count: number) => string;
  /** Where the one line saying stdout was closed goes (stderr). */
  warn?: (line: string) => void;
}

/** The human wording of lines dropped while stdout was full (`--json` has its `dropped` event). */
export const droppedText = (count: number): string =>
  `tunnel2: ${count} lines dropped while stdout was not read\n`;

/**
 * Coalesces output lines into few writes (each is a system call made at once: to a file it waits for the
 * disk; to a pipe, socket or terminal the kernel takes what fits and Node queues the rest), and
 * honours stdout's backpressure: whoever reads the agent's stdout may stop reading (a paused `less`, a
 * stuck consumer), and every line kept for it would grow the agent for as long as the tunnel serves
 * (0.93 KB per request). While a write has not drained, lines are held up to a bound and then dropped and
 * counted; the count is written when stdout drains.
 */
export function createLineWriter(stream: NodeJS.WritableStream, options: LineWriterOptions = {}): LineWriter {
  const batchMs = options.batchMs ?? 50;
  const maxPendingChars = options.maxPendingChars ?? 64 * 1024;
  const maxHeldChars = options.maxHeldChars ?? 64 * 1024;
  const droppedLine = options.droppedLine ?? droppedText;
  let pending = '';
  /** The part of `pending` that is request lines; the rest is other lines. */
  let batchedChars = 0;
  /** A write returned false: nothing more is written until 'drain'. */
  let full = false;
  let closed = false;
  let dropped = 0;
  let immediate: NodeJS.Immediate | undefined;
  let timer: NodeJS.Timeout | undefined;

  const onDrain = (): void => {
    full = false;
    if (closed) return;
    if (dropped > 0) {
      // After the lines held (they came before the dropped ones), before whatever comes next.
      pending += droppedLine(dropped);
      dropped = 0;
    }
    writePending();
  };
  const writePending = (): void => {
    if (immediate !== undefined) clearImmediate(immediate);
    if (timer !== undefined) clearTimeout(timer);
    immediate = undefined;
    timer = undefined;
    if (full || closed || pending === '') return;
    const text = pending;
    pending = '';
    batchedChars = 0;
    if (!stream.write(text)) {
      full = true;
      // flush() while full writes without waiting: the listener from before must not run twice.
      stream.removeListener('drain', onDrain);
      stream.once('drain', onDrain);
    }
  };
  return {
    write(line) {
      if (closed) return;
      if (full && pending.length - batchedChars + line.length > maxHeldChars) {
        dropped++;
        return;
      }
      pending += line;
      immediate ??= setImmediate(writePending);
    },
    writeBatched(line) {
      if (closed) return;
      if (full) {
        if (batchedChars + line.length > maxPendingChars) dropped++;
        else {
          pending += line;
          batchedChars += line.length;
        }
        return;
      }
      pending += line;
      batchedChars += line.length;
      if (pending.length >= maxPendingChars) writePending();
      else if (immediate === undefined) timer ??= setTimeout(writePending, batchMs);
    },
    // Before exit: what is held, and the count of what was not, go to the stream even if it has not
    // drained (both are bounded).
    flush: onDrain,
    close(code) {
      if (closed) return;
      closed = true;
      pending = '';
      batchedChars = 0;
      dropped = 0;
      options.warn?.(
        `tunnel2: stdout was closed (${code}); no more lines are written there, the tunnel keeps serving\n`,
      );
    },
    get pendingChars() {
      return pending.length;
    },
    get dropped() {
      return dropped;
    },
  };
}
