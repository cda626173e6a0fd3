import { fstatSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { type DestinationStream, pino } from 'pino';
import { createLineWriter } from './line-writer.js';

/** The line said on stderr when it drains again after log lines were dropped. */
export const droppedLogText = (count: number): string =>
  `tunnel2: ${count} log lines dropped while stderr was not read\n`;

/**
 * Where the diagnostic log (`--log-level`) goes: stderr. pino's own destination buffers without bound what
 * stderr does not take and, on the main thread, writes it all at exit, retrying every 100 ms until stderr
 * takes it: a reader of a piped stderr that stopped reading (`2>&1 | consumer`, a stuck log shipper) kept a
 * SIGTERMed agent up for as long as it did, holding every line meanwhile. On a pipe or socket the log goes
 * through a line writer on process.stderr instead (Node writes it non-blocking): at most 64 KiB waits, the
 * rest is dropped and counted, and at exit what stderr takes at once is written and the rest let go.
 * A terminal or a file keeps pino's destination (its writes go through the thread pool, off the event
 * loop), as does the bin's worker (`TUNNEL2_WORKER=1`), where pino does not write at exit.
 */
export function diagnosticLogDestination(): DestinationStream {
  if (isMainThread && stderrIsPipe()) {
    const writer = createLineWriter(process.stderr, { droppedLine: droppedLogText });
    process.once('exit', () => writer.flush());
    return { write: (line) => writer.write(line) };
  }
  return pino.destination(2);
}

function stderrIsPipe(): boolean {
  try {
    const stat = fstatSync(2);
    return stat.isFIFO() || stat.isSocket();
  } catch {
    return false; // No stderr at all: pino's destination reports nothing either way.
  }
}
