import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { checkNodeVersion, MINIMUM_NODE } from '../bin/check-node.js';
import { cliBin } from './support/processes.js';

const run = promisify(execFile);

describe('the Node.js version check of bin/tunnel2.js', () => {
  it('accepts the supported range', () => {
    for (const version of ['22.19.0', 'v22.19.0', '22.20.1', '23.0.0', '24.21.0', '30.1.0']) {
      expect(checkNodeVersion(version)).toBeUndefined();
    }
  });

  it('names the required version for an older one', () => {
    expect(checkNodeVersion('22.18.9')).toBe('tunnel2 requires Node.js >= 22.19 (this is v22.18.9)');
    expect(checkNodeVersion('v20.11.1')).toBe('tunnel2 requires Node.js >= 22.19 (this is v20.11.1)');
    expect(checkNodeVersion('18.0.0')).toBe('tunnel2 requires Node.js >= 22.19 (this is v18.0.0)');
    expect(checkNodeVersion('not a version')).toContain('requires Node.js >= 22.19');
  });

  it('agrees with engines.node in package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe(`>=${MINIMUM_NODE.join('.')}`);
  });

  it('on an old Node the bin prints one line and exits 1, without a stack', async () => {
    // The bin reads process.versions.node: a preloaded module makes this Node report 20.11.1.
    const fake = `data:text/javascript,Object.defineProperty(process.versions,'node',{value:'20.11.1'})`;
    const result = await run(process.execPath, ['--import', fake, cliBin, 'http', '3000']).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('tunnel2 requires Node.js >= 22.19 (this is v20.11.1)\n');
  });
});
