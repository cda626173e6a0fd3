import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** `node scripts/demo.ts` as `pnpm demo` runs it (after the build), its stdout collected. */
function startDemo(args: string[]): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['scripts/demo.ts', ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    out += text;
  });
  child.stderr?.resume();
  return { child, output: () => out };
}

/** Resolves with stdout once it holds `text` (rejects if the demo exits first). */
function waitForText(demo: ReturnType<typeof startDemo>, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!demo.output().includes(text)) return;
      demo.child.stdout?.off('data', check);
      demo.child.off('exit', onExit);
      resolve(demo.output());
    };
    const onExit = (): void =>
      reject(new Error(`the demo exited before printing "${text}":\n${demo.output()}`));
    demo.child.stdout?.on('data', check);
    demo.child.once('exit', onExit);
    check();
  });
}

const INSPECTOR_LINE = /^inspector: +(http:\/\/127\.0\.0\.1:\d+)$/m;

describe('pnpm demo (scripts/demo.ts)', () => {
  it('--once prints the inspector URL with the others and exits 0', async () => {
    const demo = startDemo(['--once']);
    const [code] = (await once(demo.child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(demo.output()).toMatch(INSPECTOR_LINE);
    expect(demo.output()).toMatch(/^see it in the inspector: http:\/\/127\.0\.0\.1:\d+$/m);
  });

  it('starts the inspector: its URL answers with the page, and the demo request is recorded there', async () => {
    const demo = startDemo([]);
    try {
      const out = await waitForText(demo, 'Press Ctrl-C to stop.');
      const inspectorUrl = INSPECTOR_LINE.exec(out)?.[1];
      expect(inspectorUrl).toBeDefined();
      const page = await fetch(`${inspectorUrl}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('tunnel2 inspector');
      const { entries } = (await (await fetch(`${inspectorUrl}/api/entries`)).json()) as {
        entries: { method: string; path: string; status: number }[];
      };
      expect(entries).toContainEqual(
        expect.objectContaining({ method: 'GET', path: '/loadtest/get', status: 200 }),
      );
    } finally {
      const exited = once(demo.child, 'exit');
      demo.child.kill('SIGINT');
      const [code] = (await exited) as [number | null];
      expect(code).toBe(0);
    }
  });
});
