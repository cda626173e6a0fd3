import { execFile } from 'node:child_process';
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
