import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cliBin } from './support/processes.js';

const run = promisify(execFile);
const edgeBin = fileURLToPath(new URL('../../edge/bin/tunnel2-edge.js', import.meta.url));

async function exitOf(
  [bin, arg]: readonly [string, string],
  env: Record<string, string>,
): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [bin, arg], { env: { ...process.env, ...env } }).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
  );
}

describe('TUNNEL2_HEAP_GROWING_PERCENT in both executables', () => {
  for (const [name, bin] of [
    ['tunnel2', [cliBin, '--version']],
    ['tunnel2-edge', [edgeBin, '--help']],
  ] as const) {
    it(`${name} refuses a value that is not an integer in [0, 1000] with one line, before starting`, async () => {
      for (const value of ['abc', '1.5', '-1', '1001']) {
        const result = await exitOf(bin, { TUNNEL2_HEAP_GROWING_PERCENT: value });
        expect(result.code).toBe(1);
        expect(result.stderr).toBe(`${name}: TUNNEL2_HEAP_GROWING_PERCENT must be an integer in [0, 1000]\n`);
      }
    });

    it(`${name} starts with 0 (V8's own heuristic) and with the default`, async () => {
      expect((await exitOf(bin, { TUNNEL2_HEAP_GROWING_PERCENT: '0' })).code).toBe(0);
      expect((await exitOf(bin, { TUNNEL2_HEAP_GROWING_PERCENT: '' })).code).toBe(0);
    });
  }
});

describe('the heap growing factor each command runs with', () => {
  // V8 sets the old generation's next limit at a full collection to what survived it times the growing
  // factor, plus one semi-space: a preload reads it back from V8's own trace of the last of two full
  // collections of a ~20 MB heap as the process exits, i.e. the factor the process really runs with.
  const factorProbe = `data:text/javascript,${encodeURIComponent(
    [
      "import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';",
      "import { runInNewContext } from 'node:vm';",
      "process.on('exit', () => {",
      "  setFlagsFromString('--expose-gc');",
      "  const gc = runInNewContext('gc');",
      "  setFlagsFromString('--trace-gc-nvp');",
      '  globalThis.kept = Array.from({ length: 400000 }, (_, i) => ({ i }));',
      '  gc();',
      '  gc();',
      "  const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;",
      "  process.stdout.write('semi-space ' + young / 2 + '\\n');",
      '});',
    ].join('\n'),
  )}`;
  const factorOf = async (args: string[], env: Record<string, string> = {}): Promise<number> => {
    const { stdout } = await run(process.execPath, ['--import', factorProbe, cliBin, ...args], {
      env: {
        ...process.env,
        TUNNEL2_HEAP_GROWING_PERCENT: '',
        TUNNEL2_WORKER: '0',
        TUNNEL2_YOUNG_GENERATION_MB: '',
        ...env,
      },
      maxBuffer: 16 * 1024 * 1024,
    });
    const field = (line: string, name: string): number =>
      Number(new RegExp(` ${name}=(\\d+)`).exec(line)?.[1]);
    const last = stdout
      .split('\n')
      .filter((line) => line.includes('old_gen_allocation_limit='))
      .at(-1);
    const semi = Number(/semi-space (\d+)/.exec(stdout)?.[1]);
    if (last === undefined || !(semi > 0)) throw new Error(`no GC trace in the probe's output: ${stdout}`);
    return (field(last, 'old_gen_allocation_limit') - semi) / field(last, 'end_object_size');
  };

  it("an agent's old generation may grow to 2.5 times what survived (100 requests in flight promote much)", async () => {
    expect(await factorOf(['http', '--help'])).toBeCloseTo(2.5, 1);
    expect(await factorOf(['tcp', '--help'])).toBeCloseTo(2.5, 1);
  });

  it("the edge's to 4 times (bulk transfers), and TUNNEL2_HEAP_GROWING_PERCENT sets either", async () => {
    expect(await factorOf(['server', '--help'])).toBeCloseTo(4, 1);
    expect(await factorOf(['http', '--help'], { TUNNEL2_HEAP_GROWING_PERCENT: '300' })).toBeCloseTo(4, 1);
    expect(await factorOf(['server', '--help'], { TUNNEL2_HEAP_GROWING_PERCENT: '100' })).toBeCloseTo(2, 1);
  });
});

describe('TUNNEL2_V8_PRETENURING in both executables', () => {
  for (const [name, bin] of [
    ['tunnel2', [cliBin, '--version']],
    ['tunnel2-edge', [edgeBin, '--help']],
  ] as const) {
    it(`${name} refuses anything but 0 or 1 with one line, before starting`, async () => {
      for (const value of ['yes', 'true', '2', ' 1']) {
        const result = await exitOf(bin, { TUNNEL2_V8_PRETENURING: value });
        expect(result.code).toBe(1);
        expect(result.stderr).toBe(`${name}: TUNNEL2_V8_PRETENURING must be 0 or 1\n`);
      }
    });

    it(`${name} starts with pretenuring off (the default, or 0) and on (1, V8's default)`, async () => {
      for (const value of ['', '0', '1']) {
        expect((await exitOf(bin, { TUNNEL2_V8_PRETENURING: value })).code).toBe(0);
      }
    });
  }
});

describe('where the tunnel runs', () => {
  // A preload runs once in every thread that loads modules: one line per thread the bin starts.
  const threadProbe = `data:text/javascript,${encodeURIComponent(
    "import { isMainThread } from 'node:worker_threads'; process.stderr.write('thread ' + (isMainThread ? 'main' : 'worker') + '\\n');",
  )}`;
  // execFile gives the child a pipe for stdout, as `tunnel2 http 3000 --json | jq` does.
  const threadsOf = async (args: string[], env: Record<string, string>): Promise<string[]> => {
    const { stderr } = await run(process.execPath, ['--import', threadProbe, cliBin, ...args], {
      env: {
        ...process.env,
        TUNNEL2_WORKER: '',
        TUNNEL2_YOUNG_GENERATION_MB: '',
        TUNNEL2_IN_PROCESS: '',
        ...env,
      },
    });
    return stderr.split('\n').filter((line) => line.startsWith('thread '));
  };

  it('on the main thread, whatever the command (a worker costs ~10 MB of RSS)', async () => {
    expect(await threadsOf(['--version'], {})).toEqual(['thread main']);
    expect(await threadsOf(['server', '--help'], {})).toEqual(['thread main']);
  });

  it('an agent whose stdout is a pipe runs on the main thread too: its writes to the pipe never block the tunnel', async () => {
    // e2e-stdout.test.ts shows the tunnel serving while the pipe is full and nobody reads it.
    expect(await threadsOf(['http', '--help'], {})).toEqual(['thread main']);
    expect(await threadsOf(['tcp', '--help'], {})).toEqual(['thread main']);
    expect(await threadsOf(['start', '--help'], {})).toEqual(['thread main']);
  });

  it('TUNNEL2_WORKER=1 runs the tunnel in a worker, whatever the command and stdout; 0 on the main thread', async () => {
    expect(await threadsOf(['http', '--help'], { TUNNEL2_WORKER: '1' })).toEqual([
      'thread main',
      'thread worker',
    ]);
    expect(await threadsOf(['--version'], { TUNNEL2_WORKER: '1' })).toEqual(['thread main', 'thread worker']);
    expect(await threadsOf(['http', '--help'], { TUNNEL2_WORKER: '0' })).toEqual(['thread main']);
  });

  it('refuses a TUNNEL2_WORKER other than 0 or 1, and a young generation outside [1, 256] MB, with one line', async () => {
    const worker = await exitOf([cliBin, '--version'], { TUNNEL2_WORKER: 'yes' });
    expect(worker).toEqual({ code: 1, stderr: 'tunnel2: TUNNEL2_WORKER must be 0 or 1\n' });
    const young = await exitOf([cliBin, '--version'], { TUNNEL2_YOUNG_GENERATION_MB: '0.5' });
    expect(young).toEqual({
      code: 1,
      stderr: 'tunnel2: TUNNEL2_YOUNG_GENERATION_MB must be a number of MB in [1, 256]\n',
    });
  });
});

describe('the young generation on the main thread', () => {
  // The new space's size (both semi-spaces) as the process ends, after the bin has set it up.
  const newSpaceProbe = `data:text/javascript,${encodeURIComponent(
    "import { getHeapSpaceStatistics } from 'node:v8'; process.on('exit', () => { const s = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space'); process.stderr.write('new space ' + s.space_size + '\\n'); });",
  )}`;
  const newSpaceOf = async (
    args: string[],
    env: Record<string, string> = {},
    bin: string = cliBin,
  ): Promise<number> => {
    const { stderr } = await run(process.execPath, ['--import', newSpaceProbe, bin, ...args], {
      env: { ...process.env, TUNNEL2_WORKER: '', TUNNEL2_YOUNG_GENERATION_MB: '', ...env },
    });
    const line = stderr.split('\n').find((text) => text.startsWith('new space '));
    return Number(line?.slice('new space '.length));
  };
  const MB = 1024 * 1024;

  it("the edge's is grown to 2 MB semi-spaces at start and held (100 requests in flight stay young)", async () => {
    expect(await newSpaceOf(['server', '--help'])).toBe(4 * MB);
    expect(await newSpaceOf(['--help'], {}, edgeBin)).toBe(4 * MB);
  });

  it("an agent's is left at V8's start, 1 MB semi-spaces at most (its idle RSS counts)", async () => {
    expect(await newSpaceOf(['http', '--help'], { TUNNEL2_WORKER: '0' })).toBeLessThanOrEqual(2 * MB);
  });

  it("an agent in its worker (TUNNEL2_WORKER=1): the main thread's is held at 1 MB semi-spaces too, unless the worker's is larger", async () => {
    // The main thread, once the worker has run: ~40 MB of survivors, which grow semi-spaces V8 leaves free.
    const grownProbe = `data:text/javascript,${encodeURIComponent(
      [
        "import { getHeapSpaceStatistics } from 'node:v8';",
        "import { isMainThread } from 'node:worker_threads';",
        "if (isMainThread) process.on('exit', () => {",
        '  const kept = [];',
        '  for (let i = 0; i < 400000; i++) kept.push({ a: i, b: i, c: i, d: i, e: i });',
        "  const s = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');",
        "  process.stderr.write('new space ' + s.space_size + ' ' + kept.length + '\\n');",
        '});',
      ].join('\n'),
    )}`;
    const grown = async (env: Record<string, string>): Promise<number> => {
      const { stderr } = await run(process.execPath, ['--import', grownProbe, cliBin, 'http', '--help'], {
        env: { ...process.env, TUNNEL2_WORKER: '1', TUNNEL2_YOUNG_GENERATION_MB: '', ...env },
      });
      return Number(/new space (\d+)/.exec(stderr)?.[1]);
    };
    // Left to V8 these survivors grow the main thread's new space to 64 MB (the second case). Held, it stays at
    // 2 MB in most runs, but in some (3 of 10 under execFile, the same before the malloc arena change) V8 still
    // grew it to 3.5-13 MB: why is not known (closing note of issue #34). What is asserted is the hold's
    // point, a new space far from V8's own growth.
    expect(await grown({})).toBeLessThanOrEqual(24 * MB);
    expect(await grown({ TUNNEL2_YOUNG_GENERATION_MB: '6' })).toBeGreaterThan(32 * MB);
  });

  it('TUNNEL2_YOUNG_GENERATION_MB sets it (a third of it per semi-space)', async () => {
    expect(await newSpaceOf(['server', '--help'], { TUNNEL2_YOUNG_GENERATION_MB: '12' })).toBe(8 * MB);
  });

  it("TUNNEL2_YOUNG_GENERATION_MB=9 gives 3 MB semi-spaces, not the next power of two (the edge's bounded peak)", async () => {
    // Grown by doubling from V8's 1 MB start, 9 MB overshot to 4 MB semi-spaces (12 MB): 9 keeps the edge's
    // peak in `bench max` at ~100 MiB in every run (bench/README.md, "the edge's bimodal peak").
    expect(await newSpaceOf(['server', '--help'], { TUNNEL2_YOUNG_GENERATION_MB: '9' })).toBe(6 * MB);
  });
});

describe('compile cache', () => {
  // The next start reuses V8's code for the CLI's modules instead of compiling each again (bench/README.md,
  // optimization log); Node puts it in the OS temp folder unless NODE_COMPILE_CACHE says otherwise.
  it('keeps compiled modules in the temp folder, unless NODE_DISABLE_COMPILE_CACHE=1', async () => {
    for (const [disable, expected] of [
      [undefined, ['node-compile-cache']],
      ['1', []],
    ] as const) {
      const tmp = mkdtempSync(join(tmpdir(), 'tunnel2-compile-cache-'));
      try {
        // Node treats a compile-cache variable that is set at all, even empty, as set.
        const { NODE_COMPILE_CACHE: _dir, NODE_DISABLE_COMPILE_CACHE: _off, ...env } = process.env;
        await run(process.execPath, [cliBin, '--version'], {
          env: {
            ...env,
            TMPDIR: tmp,
            ...(disable === undefined ? {} : { NODE_DISABLE_COMPILE_CACHE: disable }),
          },
        });
        expect(readdirSync(tmp)).toEqual(expected);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    }
  });
});
