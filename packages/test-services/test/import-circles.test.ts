import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `pnpm lint:circles` (in `pnpm test`) is dependency-cruiser run with the project's .dependency-cruiser.cjs.
 * This proves that config fails on a circle made of `import type` only, and prints it: type imports erase
 * at build time, so a checker that reads the emitted JavaScript (or ignores them) would pass it.
 */
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const depcruise = join(repoRoot, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');
const fixture = 'packages/test-services/test/fixtures/type-only-circle';

describe('the import-circles check', () => {
  let scratch = '';
  let noKnownCircles = '';

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'tunnel2-circles-'));
    // The config lets the edge's known circles through; with the edge not cruised they would count as stale,
    // so the fixture runs against an empty list of known circles, with every rule as configured.
    noKnownCircles = join(scratch, 'no-known-circles.json');
    await writeFile(noKnownCircles, '[]\n');
  });

  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('fails on a circle of type-only imports and prints the circle, not the file outside it', () => {
    const run = spawnSync(
      process.execPath,
      [depcruise, fixture, '--config', '.dependency-cruiser.cjs', '--ignore-known', noKnownCircles],
      { cwd: repoRoot, encoding: 'utf8' },
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toContain(
      `error no-circular: ${fixture}/route-table.ts → \n      ${fixture}/route.ts →\n      ${fixture}/route-table.ts`,
    );
    expect(run.stdout).not.toContain('route-name.ts');
  });
});
