import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `pnpm lint:circles` (in `pnpm test`) is dependency-cruiser run with the project's .dependency-cruiser.cjs.
 * This proves that config fails on a circle made of `import type` only, and prints it: type imports erase
 * at build time, so a checker that reads the emitted JavaScript (or ignores them) would pass it.
 */
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const depcruise = join(repoRoot, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');
const fixture = 'packages/test-services/test/fixtures/type-only-circle';

describe('the import-circles check', () => {
  it('fails on a circle of type-only imports and prints the circle, not the file outside it', () => {
    const run = spawnSync(process.execPath, [depcruise, fixture, '--config', '.dependency-cruiser.cjs'], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    expect(run.status).toBe(1);
    expect(run.stdout).toContain(
      `error no-circular: ${fixture}/route-table.ts → \n      ${fixture}/route.ts →\n      ${fixture}/route-table.ts`,
    );
    expect(run.stdout).not.toContain('route-name.ts');
  });
});
