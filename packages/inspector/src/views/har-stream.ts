import type { ServerResponse } from 'node:http';
import type { StoredEntry } from '../entries/stored-entry.js';
import { encodeSlice, HAR_EPILOGUE, type HarOptions, harEntryParts, harPrologue } from './har.js';
import { TimeSlicer } from './time-slicer.js';

/** A reader that takes nothing for this long while the export waits for it is dropped: it holds a place. */
export const HAR_STALL_MS = 10_000;

export interface HarStreamOptions extends HarOptions {
  /** Entry by id, read when its turn comes (one evicted meanwhile is left out). */
  get(id: string): StoredEntry | undefined;
  stallMs?: number;
  /** Stops the export (the inspector closing). */
  signal?: AbortSignal;
}

/**
 * Waits until `res` takes more (true), or is gone or stalled past `stallMs` (false; a stalled one is
 * destroyed).
 */
function drained(res: ServerResponse, stallMs: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      res.off('drain', onDrain);
      res.off('close', onClose);
      signal?.removeEventListener('abort', onClose);
      resolve(ok);
    };
    const onDrain = (): void => done(true);
    const onClose = (): void => done(false);
    const timer = setTimeout(() => {
      res.destroy();
      done(false);
    }, stallMs);
    res.on('drain', onDrain);
    res.on('close', onClose);
    signal?.addEventListener('abort', onClose);
  });
}

/**
 * Writes a HAR 1.2 document of the entries `ids` (oldest first) to `res`, entry by entry and each body slice
 * by slice, waiting for 'drain' whenever `write()` says so: what an export holds is one entry's snapshot
 * (views of the store's bytes, no copies), one encoded slice and the socket's buffer, whatever the size of
 * the store or the speed of the reader. Entries are looked up by id when their turn comes, so an export
 * keeps no evicted entry alive. Resolves when done or when `res` went away (then it has been destroyed).
 */
export async function streamHar(
  res: ServerResponse,
  ids: readonly string[],
  options: HarStreamOptions,
): Promise<void> {
  const stallMs = options.stallMs ?? HAR_STALL_MS;
  const { signal } = options;
  const slicer = new TimeSlicer();
  const write = async (text: string): Promise<boolean> => {
    if (res.destroyed || signal?.aborted === true) return false;
    if (res.write(text)) return true;
    return drained(res, stallMs, signal);
  };
  let first = true;
  let going = await write(harPrologue(options));
  for (let i = 0; going && i < ids.length; i++) {
    await slicer.yield();
    const entry = options.get(ids[i]!);
    if (entry === undefined) continue;
    if (!first) going = await write(',\n');
    first = false;
    for (const part of harEntryParts(entry, options)) {
      if (!going) break;
      if (typeof part === 'string') {
        going = await write(part);
        continue;
      }
      for (let at = 0; going && at < part.bytes.length; ) {
        await slicer.yield();
        const slice = encodeSlice(part, at);
        at = slice.next;
        going = await write(slice.text);
      }
    }
  }
  if (going) res.end(HAR_EPILOGUE);
  else res.destroy();
}
