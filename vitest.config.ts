import { configDefaults, defineConfig } from 'vitest/config';

/** Tests that load the machine for a minute run on their own, after the rest (vitest.isolated.config.ts). */
export const isolatedTests = ['packages/cli/test/e2e-overload.test.ts'];

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'bench/test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...isolatedTests],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
