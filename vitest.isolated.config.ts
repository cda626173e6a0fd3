import { defineConfig } from 'vitest/config';
import { isolatedTests } from './vitest.config.js';

// The overload test offers twice a tunnel's capacity for 60 s: run alongside the other files on a small
// machine it would skew their timing (and they its figures), so `pnpm test` runs it alone, afterwards.
export default defineConfig({
  test: {
    include: isolatedTests,
    testTimeout: 180_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
  },
});
