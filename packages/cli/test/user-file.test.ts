import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_USER_FILE_BYTES, readUserFile } from '../src/user-file.js';

// Issue #29, 5: a file named by the user (a config file, its `ca:`, --ca) may be anything a path can name.
describe('readUserFile', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-user-file-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('reads a regular file up to the bound, to the last byte', async () => {
    const path = join(dir, 'ok.pem');
    const text = 'é'.repeat(100_000); // 200,000 bytes: several read chunks
    await writeFile(path, text);
    expect(readUserFile(path)).toEqual({ ok: true, text });
    const exact = join(dir, 'exact.txt');
    await writeFile(exact, 'x'.repeat(1000));
    expect(readUserFile(exact, 1000)).toEqual({ ok: true, text: 'x'.repeat(1000) });
  });

  it('refuses /dev/zero, a FIFO without a writer and a directory, without reading them', () => {
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    expect(readUserFile('/dev/zero')).toEqual({
      ok: false,
      code: 'NOT_REGULAR',
      problem: 'not a regular file (a character device)',
    });
    expect(readUserFile(fifo)).toEqual({
      ok: false,
      code: 'NOT_REGULAR',
      problem: 'not a regular file (a FIFO)',
    });
    expect(readUserFile(dir)).toEqual({
      ok: false,
      code: 'NOT_REGULAR',
      problem: 'not a regular file (a directory)',
    });
  });

  it('refuses a file larger than 1 MiB by its size, before reading it', async () => {
    // Sparse: 4 GiB that take no disk and would take 4 GiB of memory to read.
    const huge = join(dir, 'huge.pem');
    await writeFile(huge, '');
    await truncate(huge, 4 * 1024 ** 3);
    expect(readUserFile(huge)).toEqual({ ok: false, code: 'TOO_LARGE', problem: 'larger than 1 MiB' });
    const over = join(dir, 'over.pem');
    await writeFile(over, Buffer.alloc(MAX_USER_FILE_BYTES + 1, 0x41));
    expect(readUserFile(over)).toMatchObject({ ok: false, code: 'TOO_LARGE' });
    expect(readUserFile(over, 10)).toEqual({ ok: false, code: 'TOO_LARGE', problem: 'larger than 10 bytes' });
  });

  it('a file that cannot be opened is named by its system code', () => {
    expect(readUserFile(join(dir, 'missing.pem'))).toMatchObject({
      ok: false,
      code: 'ENOENT',
      problem: 'cannot read it (ENOENT)',
    });
  });
});
