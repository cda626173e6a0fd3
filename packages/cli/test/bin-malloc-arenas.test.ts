import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseMallocArenas, runtimeGlibcVersion, shouldLimitArenas } from '../bin/malloc-arenas.js';
import { cliBin, type Spawned, spawnNode } from './support/processes.js';

const run = promisify(execFile);
const edgeBin = fileURLToPath(new URL('../../edge/bin/tunnel2-edge.js', import.meta.url));
const glibc = process.platform === 'linux' && runtimeGlibcVersion() !== undefined;
const always = () => '2.36';

/** A preload that says on stderr each time node starts the bin, with its pid: an exec shows as two lines. */
const startProbe = `data:text/javascript,${encodeURIComponent("process.stderr.write('started ' + process.pid + '\\n');")}`;

function environOf(pid: number): Map<string, string> {
  const vars = new Map<string, string>();
  for (const pair of readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')) {
    const at = pair.indexOf('=');
    if (at > 0) vars.set(pair.slice(0, at), pair.slice(at + 1));
  }
  return vars;
}

/** The probe's lines in what a process wrote on stderr. */
function starts(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.startsWith('started '));
}

/** Starts an edge through `bin` with the start probe and waits until it listens. */
async function edgeThrough(bin: string, env: NodeJS.ProcessEnv): Promise<Spawned> {
  const args = bin === cliBin ? [bin, 'server'] : [bin];
  const edge = spawnNode(['--import', startProbe, ...args, '--port', '0', '--json', '--log-level', 'warn'], {
    MALLOC_ARENA_MAX: undefined,
    TUNNEL2_MALLOC_ARENAS: undefined,
    ...env,
  });
  await edge.waitFor('listening');
  return edge;
}

describe('parseMallocArenas', () => {
  it('reads the number of arenas, one by default, 0 for glibc to decide', () => {
    expect(parseMallocArenas(undefined)).toEqual({ arenas: 1 });
    expect(parseMallocArenas('')).toEqual({ arenas: 1 });
    expect(parseMallocArenas('0')).toEqual({ arenas: 0 });
    expect(parseMallocArenas('4')).toEqual({ arenas: 4 });
    expect(parseMallocArenas('64')).toEqual({ arenas: 64 });
  });

  it('names the setting and its range for anything else', () => {
    for (const value of ['abc', '-1', '1.5', '65', ' 1', '1e1']) {
      expect(parseMallocArenas(value)).toEqual({
        problem: 'TUNNEL2_MALLOC_ARENAS must be an integer in [0, 64] (0: glibc decides)',
      });
    }
  });
});

describe('shouldLimitArenas', () => {
  const linux = process.platform === 'linux';

  it('executes again on glibc Linux when nothing in the environment says how many arenas', () => {
    expect(shouldLimitArenas(1, {}, '', always)).toBe(linux);
    expect(
      shouldLimitArenas(
        2,
        { GLIBC_TUNABLES: 'glibc.malloc.tcache_count=0' },
        '--max-old-space-size=64',
        always,
      ),
    ).toBe(linux);
  });

  it("leaves an operator's MALLOC_ARENA_MAX or glibc tunable, 0, a debugger and other C libraries alone", () => {
    expect(shouldLimitArenas(1, { MALLOC_ARENA_MAX: '8' }, '', always)).toBe(false);
    expect(shouldLimitArenas(1, { GLIBC_TUNABLES: 'glibc.malloc.arena_max=4' }, '', always)).toBe(false);
    expect(shouldLimitArenas(0, {}, '', always)).toBe(false);
    expect(shouldLimitArenas(1, {}, '--inspect-brk=0', always)).toBe(false);
    expect(shouldLimitArenas(1, {}, '', () => undefined)).toBe(false);
  });
});

describe.runIf(glibc)('the executables on glibc Linux', () => {
  for (const [name, bin] of [
    ['tunnel2 server', cliBin],
    ['tunnel2-edge', edgeBin],
  ] as const) {
    it(`${name} runs with MALLOC_ARENA_MAX=1, executed once in the same process, which SIGTERM still drains`, async () => {
      const edge = await edgeThrough(bin, {});
      try {
        const pid = edge.child.pid!;
        expect(environOf(pid).get('MALLOC_ARENA_MAX')).toBe('1');
        // Node started the bin twice in one process: before and after the exec, never a third time.
        expect(starts(edge.stderr())).toEqual([`started ${pid}`, `started ${pid}`]);
      } finally {
        edge.kill('SIGTERM');
      }
      expect(await edge.exited).toBe(0);
    });
  }

  it('TUNNEL2_MALLOC_ARENAS sets the number, 0 leaves glibc its default and starts once', async () => {
    const four = await edgeThrough(cliBin, { TUNNEL2_MALLOC_ARENAS: '4' });
    const zero = await edgeThrough(cliBin, { TUNNEL2_MALLOC_ARENAS: '0' });
    try {
      expect(environOf(four.child.pid!).get('MALLOC_ARENA_MAX')).toBe('4');
      expect(environOf(zero.child.pid!).has('MALLOC_ARENA_MAX')).toBe(false);
      expect(starts(zero.stderr())).toEqual([`started ${zero.child.pid}`]);
    } finally {
      four.kill('SIGKILL');
      zero.kill('SIGKILL');
    }
  });

  it("keeps an operator's MALLOC_ARENA_MAX and starts once", async () => {
    const edge = await edgeThrough(cliBin, { MALLOC_ARENA_MAX: '3' });
    try {
      expect(environOf(edge.child.pid!).get('MALLOC_ARENA_MAX')).toBe('3');
      expect(starts(edge.stderr())).toEqual([`started ${edge.child.pid}`]);
    } finally {
      edge.kill('SIGKILL');
    }
  });

  it('a command that prints and exits is not executed again', async () => {
    for (const args of [
      [cliBin, '--version'],
      [cliBin, 'http', '--help'],
      [cliBin, 'server', '-h'],
      [edgeBin, '--help'],
    ]) {
      const { stdout, stderr } = await run(process.execPath, ['--import', startProbe, ...args], {
        env: { ...process.env, MALLOC_ARENA_MAX: undefined, TUNNEL2_MALLOC_ARENAS: undefined },
      });
      expect(stdout.length).toBeGreaterThan(0);
      expect(starts(stderr)).toHaveLength(1);
    }
  });
});

describe('an invalid TUNNEL2_MALLOC_ARENAS', () => {
  for (const [name, args] of [
    ['tunnel2', [cliBin, 'server']],
    ['tunnel2-edge', [edgeBin]],
  ] as const) {
    it(`${name} refuses it with one line, before starting`, async () => {
      const result = await run(process.execPath, [...args, '--port', '0'], {
        env: { ...process.env, TUNNEL2_MALLOC_ARENAS: 'many' },
      }).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
      );
      expect(result).toEqual({
        code: 1,
        stderr: `${name}: TUNNEL2_MALLOC_ARENAS must be an integer in [0, 64] (0: glibc decides)\n`,
      });
    });
  }
});
