import type { ServerResponse } from 'node:http';
import { deterministicChunks } from './deterministic-bytes.js';

const EMPTY = Buffer.alloc(0);

/**
 * Writes the first `n` deterministic bytes to `res`, one 64 KiB view at a time, pausing whenever
 * `write()` returns false and resuming on 'drain': memory stays at one socket buffer whatever `n` is.
 * Then either ends the response or, for `then: drop`, calls `drop` once every byte has been handed to the
 * socket (the write callback), so the client really receives the `n` bytes before the connection dies.
 * Stops quietly if the client goes away.
 */
export function writeDeterministicBytes(
  res: ServerResponse,
  n: number,
  then: { end: true } | { drop: () => void },
): void {
  const chunks = deterministicChunks(n);
  const pump = (): void => {
    for (;;) {
      if (res.destroyed) return;
      const next = chunks.next();
      if (next.done) break;
      if (!res.write(next.value)) {
        res.once('drain', pump);
        return;
      }
    }
    if ('end' in then) res.end();
    // Socket writes complete in order: this callback runs after every byte before it left.
    else res.write(EMPTY, () => then.drop());
  };
  pump();
}
