import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cliBin } from './support/processes.js';

const run = promisify(execFile);
const holdModule = new URL('../bin/optimizing-compiler.js', import.meta.url).href;

// V8's %GetOptimizationStatus bits (src/runtime/runtime.h): optimized by Maglev, by TurboFan.
const MAGLEVVED = 1 << 5;
const TURBOFANNED = 1 << 6;

/**
 * A child node (natives syntax on) that makes one function hot while `load` has not settled and another one
 * after, and prints both functions' optimization status. `settle` is `resolve` or `reject`.
 */
function probe(nodeFlags: string, settle: 'resolve' | 'reject'): string {
  return [
    `import { loadWithoutOptimizingCompiler } from ${JSON.stringify(holdModule)};`,
    // Each its own loop: a wrapper around a shared hot function may never tier up itself.
    'const during = (n) => { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; };',
    'const after = (n) => { let s = 1; for (let i = 0; i < n; i++) s += i % 5; return s; };',
    // Two rounds with a turn between them: V8 compiles concurrently and installs the code on a later call.
    'const heat = async (f) => { for (let r = 0; r < 10; r++) { for (let k = 0; k < 5000; k++) f(200); await new Promise((go) => setTimeout(go, 20)); } };',
    'let settle;',
    `const loaded = loadWithoutOptimizingCompiler(() => new Promise((resolve, reject) => { settle = ${settle}; }), ${JSON.stringify(nodeFlags)});`,
    'await heat(during);',
    'settle(new Error("load failed"));',
    'await loaded.catch(() => {});',
    'await heat(after);',
    'process.stdout.write(JSON.stringify({ during: %GetOptimizationStatus(during), after: %GetOptimizationStatus(after) }));',
  ].join('\n');
}

async function statusOf(
  nodeFlags: string,
  settle: 'resolve' | 'reject',
  env: Record<string, string> = {},
): Promise<{ during: number; after: number }> {
  const { stdout } = await run(
    process.execPath,
    ['--allow-natives-syntax', '--input-type=module', '-e', probe(nodeFlags, settle)],
    { env: { ...process.env, TUNNEL2_HOLD_TURBOFAN: '', ...env } },
  );
  return JSON.parse(stdout) as { during: number; after: number };
}

describe('loadWithoutOptimizingCompiler', () => {
  it('holds TurboFan off while the load runs (Maglev still compiles) and turns it back on once it resolves', async () => {
    const { during, after } = await statusOf('', 'resolve');
    expect(during & TURBOFANNED).toBe(0);
    expect(during & MAGLEVVED).toBe(MAGLEVVED);
    expect(after & TURBOFANNED).toBe(TURBOFANNED);
  });

  it('turns TurboFan back on when the load fails too', async () => {
    const { after } = await statusOf('', 'reject');
    expect(after & TURBOFANNED).toBe(TURBOFANNED);
  });

  it('leaves TurboFan alone when node flags decide about it, and with TUNNEL2_HOLD_TURBOFAN=0', async () => {
    for (const flags of ['--no-turbofan', '--max-semi-space-size=1 --turbofan', '--max-opt=3']) {
      // The flags are only read, not applied: TurboFan being on throughout shows nothing was held.
      expect((await statusOf(flags, 'resolve')).during & TURBOFANNED).toBe(TURBOFANNED);
    }
    const off = await statusOf('', 'resolve', { TUNNEL2_HOLD_TURBOFAN: '0' });
    expect(off.during & TURBOFANNED).toBe(TURBOFANNED);
  });
});

describe('the tunnel2 executable and TurboFan', () => {
  // A preload checks, as the process exits after `tunnel2 --version` (the CLI's modules loaded), that code
  // made hot then is optimized by TurboFan: the bin turned the compiler back on.
  const exitProbe = `data:text/javascript,${encodeURIComponent(
    [
      "process.on('exit', () => {",
      '  const sum = (n) => { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s; };',
      '  for (let k = 0; k < 50000; k++) sum(200);',
      "  process.stderr.write('status ' + %GetOptimizationStatus(sum) + '\\n');",
      '});',
    ].join('\n'),
  )}`;

  it('runs with TurboFan once its modules are loaded', async () => {
    const { stderr } = await run(
      process.execPath,
      ['--allow-natives-syntax', '--import', exitProbe, cliBin, '--version'],
      { env: { ...process.env, TUNNEL2_HOLD_TURBOFAN: '', TUNNEL2_WORKER: '0' } },
    );
    const status = Number(/status (\d+)/.exec(stderr)?.[1]);
    expect(status & TURBOFANNED).toBe(TURBOFANNED);
  });

  it('refuses a TUNNEL2_HOLD_TURBOFAN other than 0 or 1 with one line, before starting', async () => {
    const result = await run(process.execPath, [cliBin, '--version'], {
      env: { ...process.env, TUNNEL2_HOLD_TURBOFAN: 'yes' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );
    expect(result).toEqual({ code: 1, stderr: 'tunnel2: TUNNEL2_HOLD_TURBOFAN must be 0 or 1\n' });
    expect(fileURLToPath(holdModule)).toMatch(/optimizing-compiler\.js$/);
  });
});
