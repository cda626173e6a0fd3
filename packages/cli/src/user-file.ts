import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';

/**
 * The most a file the user names (a config file, a CA bundle) may hold. Both are kilobytes; a megabyte
 * is generous, and it stops `/dev/zero` or a multi-gigabyte file from being read into memory.
 */
export const MAX_USER_FILE_BYTES = 1024 * 1024;

/** Why a user-named file was not read: a system error code (`ENOENT`, `EACCES`), or one of these two. */
export type UserFileProblemCode = 'NOT_REGULAR' | 'TOO_LARGE' | (string & {});

export type UserFileRead =
  | { ok: true; text: string }
  | {
      ok: false;
      code: UserFileProblemCode;
      /** What is wrong, worded to follow the file's name ("not a regular file (a FIFO)"). */
      problem: string;
      cause?: unknown;
    };

/** What a file that is not a regular one is, in the user's words. */
function kindOf(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * Reads a file the user named, as UTF-8, only if it is a regular file of at most `maxBytes`. A config file
 * from an untrusted repository may point anywhere: `/dev/zero` would be read until memory runs out, a FIFO
 * would block the read (and with it Ctrl-C, which the blocked thread never sees). Opened non-blocking (a
 * FIFO without a writer then opens at once), checked with fstat on the opened descriptor (no race with a
 * rename), and read in chunks that stop one byte past the bound (a file that grows meanwhile).
 */
export function readUserFile(path: string, maxBytes = MAX_USER_FILE_BYTES): UserFileRead {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (constants.O_NOCTTY ?? 0));
  } catch (err) {
    return systemProblem(err);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) {
      return { ok: false, code: 'NOT_REGULAR', problem: `not a regular file (${kindOf(stats)})` };
    }
    if (stats.size > maxBytes) return tooLarge(maxBytes);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
      if (total > maxBytes) return tooLarge(maxBytes);
    }
    return { ok: true, text: Buffer.concat(chunks, total).toString('utf8') };
  } catch (err) {
    return systemProblem(err);
  } finally {
    closeSync(fd);
  }
}

function tooLarge(maxBytes: number): UserFileRead {
  const size = maxBytes % (1024 * 1024) === 0 ? `${maxBytes / (1024 * 1024)} MiB` : `${maxBytes} bytes`;
  return { ok: false, code: 'TOO_LARGE', problem: `larger than ${size}` };
}

function systemProblem(err: unknown): UserFileRead {
  const code = (err as { code?: unknown }).code;
  const name = typeof code === 'string' ? code : String(err);
  return { ok: false, code: name, problem: `cannot read it (${name})`, cause: err };
}
