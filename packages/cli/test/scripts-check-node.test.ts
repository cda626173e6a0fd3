import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('../../../', import.meta.url);
const script = fileURLToPath(new URL('scripts/check-node.cjs', root));
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  engines: { node: string };
  scripts: Record<string, string>;
};

async function check(
  node: string,
  preload: string[] = [],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(node, [...preload, script]).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

const expected = (version: string): string =>
  `tunnel2 needs Node.js ${pkg.engines.node} (engines.node); this is Node.js ${version}. ` +
  'Install Node 22.19 or newer from https://nodejs.org (or: nvm install 22 && nvm use 22), then run this again.\n';

/** The Debian Node of the machine, when it has one older than the engines range. */
const systemNode = '/usr/bin/node';
const oldSystemNode =
  existsSync(systemNode) &&
  Number(/^v(\d+)/.exec(execFileSync(systemNode, ['--version'], { encoding: 'utf8' }))?.[1]) < 22;

describe('scripts/check-node.cjs (first in pnpm demo and pnpm test)', () => {
  it('runs first in the demo and test scripts', () => {
    expect(pkg.scripts.demo).toMatch(/^node scripts\/check-node\.cjs && /);
    expect(pkg.scripts.test).toMatch(/^node scripts\/check-node\.cjs && /);
  });

  it('is silent on a supported Node', async () => {
    expect(await check(process.execPath)).toMatchObject({ code: 0, stdout: '', stderr: '' });
  });

  it('on an older Node: one line with both versions and how to get Node 22+, exit 1, no stack', async () => {
    // A preloaded module makes this Node report an old version to the script.
    const fake = `data:text/javascript,Object.defineProperty(process,'version',{value:'v20.11.1'})`;
    expect(await check(process.execPath, ['--import', fake])).toEqual(
      expect.objectContaining({ code: 1, stdout: '', stderr: expected('v20.11.1') }),
    );
  });

  it.skipIf(!oldSystemNode)("under the machine's real older Node", async () => {
    const version = execFileSync(systemNode, ['--version'], { encoding: 'utf8' }).trim();
    expect(await check(systemNode)).toEqual(expect.objectContaining({ code: 1, stderr: expected(version) }));
  });
});
