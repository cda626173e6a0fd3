import { defineConfig } from 'vitest/config';
import { isolatedTests } from './vitest.config.js';

// Timing-sensitive and machine-loading tests (see isolatedTests): `pnpm test` runs them after the others,
// one file at a time, so none shares the machine with another.
export default defineConfig({
  test: {
    include: isolatedTests,
    testTimeout: 180_000,
    hookTimeout: 60_000,
    pool: 'forks',
    setupFiles: ['./test/config-home-setup.ts'],
    fileParallelism: false,
    reporters: ['default'],
  },
});
