// The README's test command is what CI runs (.ci/run, verbatim), the README names every system package
// .ci/run installs for it, and the command says what it is doing during the long typecheck.

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../../scripts/pack-cli.js';
import { parseBuildLine } from '../../../scripts/typecheck.js';

const readme = (): Promise<string> => readFile(join(repoRoot, 'README.md'), 'utf8');
const ciRun = (): Promise<string> => readFile(join(repoRoot, '.ci', 'run'), 'utf8');

describe('the test command', () => {
  it("is the same in the README and in .ci/run (which runs the README's verbatim)", async () => {
    const inReadme = [
      ...(await readme()).matchAll(/^npx -y pnpm@[\d.]+ install && npx -y pnpm@[\d.]+ test$/gm),
    ];
    expect(inReadme.length).toBeGreaterThan(0);
    const ci = (await ciRun()).split('\n');
    const marker = ci.indexOf("# The README's test command, verbatim:");
    expect(marker).toBeGreaterThan(0);
    expect(ci[marker + 1]).toBe(inReadme[0]![0]);
    // The pnpm it names is the one package.json pins.
    const pkg = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')) as {
      packageManager: string;
      scripts: Record<string, string>;
    };
    expect(ci[marker + 1]).toContain(pkg.packageManager);
    // `pnpm test` prints its typecheck's progress (scripts/typecheck.ts), then vitest's per-file lines.
    expect(pkg.scripts.test).toMatch(/ && node scripts\/typecheck\.ts && biome check \. && vitest run /);
    // The install's build of a fresh clone (a minute) says what it builds too.
    expect(pkg.scripts.prepare).toBe('node scripts/check-node.cjs && node scripts/typecheck.ts --build-only');
  });

  it('the README lists every Debian package .ci/run installs, and what happens without it', async () => {
    const ci = await ciRun();
    const installed = new Set(
      [...ci.matchAll(/APT_PACKAGES\+=\(([^)]+)\)/g)].flatMap((m) => m[1]!.trim().split(/\s+/)),
    );
    expect(installed.size).toBeGreaterThan(5);
    const text = await readme();
    const section = text.slice(text.indexOf('### Tests on a fresh machine'));
    expect(section.length).toBeGreaterThan(100);
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| ---')));
    for (const name of installed) expect(table, name).toContain(`\`${name}\``);
  });
});

describe('scripts/typecheck.ts reads tsc -b --verbose', () => {
  it('into a line per project', () => {
    expect(parseBuildLine('3:28:25 PM - Projects in this build: ')).toEqual({ kind: 'projects' });
    expect(parseBuildLine('    * packages/protocol/tsconfig.json')).toEqual({ kind: 'listed' });
    expect(
      parseBuildLine(
        "15:28:25 - Project 'packages/registry/tsconfig.json' is up to date because newest input 'a' is older than output 'b'",
      ),
    ).toEqual({ kind: 'up-to-date', project: 'packages/registry' });
    expect(
      parseBuildLine(
        "3:29:32 PM - Project 'bench/tsconfig.json' is out of date because output 'bench/dist/.tsbuildinfo' is older than input 'x'",
      ),
    ).toEqual({ kind: 'out-of-date', project: 'bench' });
    expect(
      parseBuildLine(`3:28:25 PM - Building project '${join(repoRoot, 'packages/cli/tsconfig.json')}'...`),
    ).toEqual({ kind: 'building', project: 'packages/cli' });
    expect(
      parseBuildLine(
        `3:28:25 PM - Updating output timestamps of project '${join(repoRoot, 'packages/edge/tsconfig.json')}'...`,
      ),
    ).toEqual({ kind: 'timestamps' });
    expect(
      parseBuildLine(
        "3:28:25 PM - Skipping build of project '/r/packages/cli/tsconfig.json' because its dependency '/r/packages/edge' has errors",
      ),
    ).toMatchObject({ kind: 'skipped', reason: "its dependency '/r/packages/edge' has errors" });
    expect(
      parseBuildLine("src/a.ts(1,7): error TS2322: Type 'string' is not assignable to type 'number'."),
    ).toEqual({
      kind: 'other',
    });
  });
});

describe('scripts/typecheck.ts --build-only', () => {
  it('prints a line per project of the build, then the total (the workspace is built: each is up to date)', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(repoRoot, 'scripts', 'typecheck.ts'), '--build-only'],
      { cwd: repoRoot, timeout: 120_000 },
    );
    const lines = stdout.trimEnd().split('\n');
    const projects = /^typecheck: (\d+) projects \(tsc -b\)$/.exec(lines[0] ?? '');
    expect(projects, stdout).not.toBeNull();
    const count = Number(projects![1]);
    const perProject = lines.slice(1, -1);
    expect(perProject).toHaveLength(count);
    for (const line of perProject)
      expect(line).toMatch(/^typecheck: (packages\/[a-z-]+|bench) (up to date|built \(\d+\.\d s\))$/);
    expect(perProject).toContain('typecheck: packages/cli up to date');
    expect(lines.at(-1)).toMatch(/^typecheck: packages (up to date|built) in \d+\.\d s$/);
  }, 150_000);
});
