import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './support/processes.js';

/**
 * Issue #29, 5: `ca: /dev/zero` in a config file (or `--ca /dev/zero`) was read until the kernel killed the
 * agent, and a FIFO blocked it where not even SIGTERM reached it. Every file the CLI reads because the user
 * named it must be a regular file of at most 1 MiB; anything else is one line and exit status 2.
 */
describe('files the user names: only regular files, at most 1 MiB', () => {
  let dir: string;
  let fifo: string;
  let huge: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-hostile-files-'));
    fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    huge = join(dir, 'huge.pem');
    await writeFile(huge, '');
    await truncate(huge, 2 * 1024 ** 3); // sparse
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('--ca /dev/zero, a FIFO, a huge file: exit 2 with one line naming the file', async () => {
    const cases: [string, string][] = [
      ['/dev/zero', 'not a regular file (a character device)'],
      [fifo, 'not a regular file (a FIFO)'],
      [dir, 'not a regular file (a directory)'],
      [huge, 'larger than 1 MiB'],
    ];
    const results = await Promise.all(
      cases.map(([file]) => cli(['http', 'https://localhost:8443', '--ca', file])),
    );
    results.forEach(({ code, stdout, stderr }, i) => {
      const [file, why] = cases[i]!;
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toBe(`tunnel2: --ca ${file}: ${why}\n`);
    });
  });

  it('start --config /dev/zero, a FIFO, a directory: exit 2 with one line naming the file', async () => {
    const cases: [string, string][] = [
      ['/dev/zero', 'not a regular file (a character device)'],
      [fifo, 'not a regular file (a FIFO)'],
      [dir, 'not a regular file (a directory)'],
      [huge, 'larger than 1 MiB'],
    ];
    const results = await Promise.all(cases.map(([file]) => cli(['start', '--all', '--config', file])));
    results.forEach(({ code, stderr }, i) => {
      const [file, why] = cases[i]!;
      expect(code).toBe(2);
      expect(stderr).toBe(`tunnel2: ${file}: ${why}\n`);
    });
  });

  it('a config file whose tunnel has `ca: /dev/zero` or `ca:` a FIFO: exit 2 naming the key', async () => {
    const config = join(dir, 'tunnel2.yml');
    await writeFile(config, 'tunnels:\n  web: { target: "https://localhost:8443", ca: /dev/zero }\n');
    const zero = await cli(['start', 'web', '--config', config]);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toBe(
      'tunnel2: tunnel2.yml: tunnels.web.ca: "/dev/zero": not a regular file (a character device)\n',
    );
    await writeFile(config, 'tunnels:\n  api: { target: "https://localhost:8444", ca: fifo }\n');
    const pipe = await cli(['start', 'api', '--config', config]);
    expect(pipe.code).toBe(2);
    expect(pipe.stderr).toBe('tunnel2: tunnel2.yml: tunnels.api.ca: "fifo": not a regular file (a FIFO)\n');
  });
});
