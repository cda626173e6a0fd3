import { write as fsWrite, writeSync } from 'node:fs';

/**
 * Where the edge's log lines go (stderr, by file descriptor), with backpressure: a write is in flight at a
 * time, on libuv's thread pool like pino's own destination, so a slow or frozen reader (a paused terminal,
 * a stuck log shipper) never stops the event loop. While it is in flight, lines wait up to a bound; beyond
 * it they are dropped and counted, and one line says how many once the reader takes data again. Without the
 * bound the log would grow the process for as long as the reader stays stuck (pino's SonicBoom buffers
 * without limit by default).
 */
export interface LogSink {
  /** Writes one or more whole lines (each ending in a newline). */
  write(text: string): void;
  /** Calls `done` once what was accepted so far is written (or could not be: the reader is gone). */
  flush(done?: (err?: Error) => void): void;
  /** Characters accepted but not yet handed to the kernel (bounded by `maxBufferedChars` plus one write). */
  readonly bufferedChars: number;
  /** Lines dropped since the last "dropped" line was queued. */
  readonly dropped: number;
}

export interface LogSinkOptions {
  /** The file descriptor written to; default 2 (stderr). */
  fd?: number;
  /** Characters held waiting for the write in flight (or for the end of the turn); default 1 Mi. */
  maxBufferedChars?: number;
  /** The line (in the log's own format) saying that `count` lines were dropped. */
  droppedLine: (count: number) => string;
}

// A pipe whose descriptor is non-blocking answers EAGAIN when full: the write is tried again a little later.
const RETRY_MS = 50;

/**
 * Lines still queued when the process exits (an uncaught error, a process.exit() that did not flush) are
 * written synchronously, as pino's own destination does; but not by a sink whose write has been in flight
 * for a while: its reader stopped, and a synchronous write would hold the exit for good. A write in flight
 * for less than that is taken as done (a reader that reads takes bytes in microseconds).
 */
const STUCK_MS = 500;
const atExit = new Set<() => void>();
let exitHooked = false;
function writeAtExit(write: () => void): () => void {
  if (!exitHooked) {
    exitHooked = true;
    process.once('exit', () => {
      for (const pending of atExit) pending();
    });
  }
  atExit.add(write);
  return () => atExit.delete(write);
}

export function createLogSink(options: LogSinkOptions): LogSink {
  const fd = options.fd ?? 2;
  const maxBufferedChars = options.maxBufferedChars ?? 1024 * 1024;
  let queued: string[] = [];
  let queuedChars = 0;
  /** The write in flight: its text, or after a partial write the bytes the kernel has not taken yet. */
  let inFlight: string | Buffer | undefined;
  /** A write is queued for the end of this turn: the lines logged in one turn go out in one write. */
  let scheduled = false;
  let inFlightSince = 0;
  let dropped = 0;
  /** The reader is gone (EPIPE, a closed descriptor): nothing more is written, nothing more kept. */
  let gone = false;
  /** The write in flight met a full non-blocking pipe (EAGAIN) and waits to be tried again: not under way. */
  let retrying = false;
  let flushWaiters: Array<(err?: Error) => void> = [];
  const unhookExit = writeAtExit(() => {
    if (gone) return;
    // A write waiting for its retry is not on the thread pool: its bytes go now, before the queue (else the
    // log would lose them and still read as complete). A write under way for long has a stopped reader.
    const waiting = retrying ? inFlight : undefined;
    if (!retrying && inFlight !== undefined && performance.now() - inFlightSince > STUCK_MS) return;
    const rest = queued.join('') + (dropped > 0 ? options.droppedLine(dropped) : '');
    if (waiting === undefined && rest === '') return;
    writeAllSync(fd, Buffer.concat([Buffer.from(waiting ?? ''), Buffer.from(rest)]));
  });

  const settleFlushes = (): void => {
    if (inFlight !== undefined || queuedChars > 0 || flushWaiters.length === 0) return;
    const waiters = flushWaiters;
    flushWaiters = [];
    for (const done of waiters) done();
  };

  const writeNext = (): void => {
    scheduled = false;
    if (gone || inFlight !== undefined) return;
    if (queuedChars === 0) {
      settleFlushes();
      return;
    }
    // A string, not a Buffer: fs.write encodes it in C++ without a JS copy (pino's destination does the same).
    inFlight = queued.length === 1 ? queued[0]! : queued.join('');
    inFlightSince = performance.now();
    queued = [];
    queuedChars = 0;
    writeInFlight();
  };

  const writeInFlight = (): void => {
    const data = inFlight as string | Buffer;
    const onWritten = (err: NodeJS.ErrnoException | null, written: number): void => {
      if (err) {
        if (err.code === 'EAGAIN') {
          retrying = true;
          setTimeout(() => {
            retrying = false;
            writeInFlight();
          }, RETRY_MS).unref();
          return;
        }
        // EPIPE, EBADF...: there is no one left to tell.
        gone = true;
        unhookExit();
        inFlight = undefined;
        queued = [];
        queuedChars = 0;
        const waiters = flushWaiters;
        flushWaiters = [];
        for (const done of waiters) done(err);
        return;
      }
      const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      if (written < bytes) {
        // A view, not a copy: the rest of the same bytes.
        inFlight = (typeof data === 'string' ? Buffer.from(data) : data).subarray(written);
        writeInFlight();
        return;
      }
      inFlight = undefined;
      if (dropped > 0) {
        // After the lines held (they came before the dropped ones), before whatever comes next.
        const line = options.droppedLine(dropped);
        dropped = 0;
        queued.push(line);
        queuedChars += line.length;
      }
      writeNext();
    };
    if (typeof data === 'string') fsWrite(fd, data, null, 'utf8', onWritten);
    else fsWrite(fd, data, 0, data.length, null, onWritten);
  };

  return {
    write(text) {
      if (gone) return;
      // Once a line is dropped, every line is until the count is written: the log never reads as if
      // nothing was lost between two lines that made it.
      if (dropped > 0 || (queuedChars > 0 && queuedChars + text.length > maxBufferedChars)) {
        dropped += countLines(text);
        return;
      }
      queued.push(text);
      queuedChars += text.length;
      if (!scheduled && inFlight === undefined) {
        scheduled = true;
        queueMicrotask(writeNext);
      }
    },
    flush(done) {
      if (done === undefined) return;
      if (gone) {
        done();
        return;
      }
      flushWaiters.push(done);
      settleFlushes();
    },
    get bufferedChars() {
      return queuedChars + (inFlight?.length ?? 0);
    },
    get dropped() {
      return dropped;
    },
  };
}

function countLines(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) count++;
  return Math.max(count, 1);
}

/** Writes `bytes` to `fd` now, through partial writes and, for a bounded time, a full non-blocking pipe. */
function writeAllSync(fd: number, bytes: Buffer): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  let rest = bytes;
  for (let tries = 0; rest.length > 0 && tries < 50; ) {
    try {
      rest = rest.subarray(writeSync(fd, rest));
    } catch (err) {
      // EPIPE, EBADF: nothing more can be done while exiting.
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      tries++;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}
