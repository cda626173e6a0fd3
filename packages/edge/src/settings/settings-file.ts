import { constants } from 'node:fs';
import { open } from 'node:fs/promises';

/** The most the edge's config file may hold: settings are kilobytes. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
/** The most a token file may hold: 100,000 tokens of 64 characters and more. */
export const MAX_TOKEN_FILE_BYTES = 16 * 1024 * 1024;

/** Why a settings file was not read: a system error code (`ENOENT`, `EACCES`), or one of these two. */
export class SettingsFileProblem extends Error {
  readonly code: 'NOT_REGULAR' | 'TOO_LARGE' | (string & {});

  constructor(code: SettingsFileProblem['code'], message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SettingsFileProblem';
    this.code = code;
  }
}

/**
 * Reads a file the operator named (the config file, the token file) as UTF-8, only if it is a regular file
 * of at most `maxBytes`: `/dev/zero` would otherwise be read until memory runs out and a FIFO would block
 * the start for good. Opened non-blocking (a FIFO without a writer then opens at once), checked on the
 * opened descriptor (no race with a rename) and read no further than one byte past the bound (a file that
 * grows meanwhile). The message follows the file's name: "not a regular file (a FIFO)".
 */
export async function readSettingsFile(path: string, maxBytes: number): Promise<string> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | (constants.O_NOCTTY ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new SettingsFileProblem(code, code, { cause: err });
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) {
      const kind = stats.isDirectory()
        ? 'a directory'
        : stats.isFIFO()
          ? 'a FIFO'
          : stats.isCharacterDevice()
            ? 'a character device'
            : stats.isSocket()
              ? 'a socket'
              : 'not a file';
      throw new SettingsFileProblem('NOT_REGULAR', `not a regular file (${kind})`);
    }
    const tooLarge = new SettingsFileProblem('TOO_LARGE', `larger than ${sizeText(maxBytes)}`);
    if (stats.size > maxBytes) throw tooLarge;
    const buffer = Buffer.allocUnsafe(Math.min(stats.size, maxBytes) + 1);
    let total = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, total, buffer.length - total, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > maxBytes) throw tooLarge;
      // The file grew since fstat: read on, up to the bound.
      if (total === buffer.length) return await readGrown(handle, buffer, maxBytes);
    }
    return buffer.toString('utf8', 0, total);
  } finally {
    await handle.close();
  }
}

async function readGrown(
  handle: Awaited<ReturnType<typeof open>>,
  start: Buffer,
  maxBytes: number,
): Promise<string> {
  const buffer = Buffer.allocUnsafe(maxBytes + 1);
  start.copy(buffer);
  let total = start.length;
  for (;;) {
    const { bytesRead } = await handle.read(buffer, total, buffer.length - total, null);
    if (bytesRead === 0) return buffer.toString('utf8', 0, total);
    total += bytesRead;
    if (total > maxBytes) throw new SettingsFileProblem('TOO_LARGE', `larger than ${sizeText(maxBytes)}`);
  }
}

function sizeText(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}
