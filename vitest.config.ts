import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Tests that measure time (the load generator's pacing) or load the machine for a minute (overload) run
 * one at a time after the rest (vitest.isolated.config.ts): on two cores, sharing the machine with other
 * test files skews their figures, and their load skews the others' timing.
 */
export const isolatedTests = [
  'bench/test/load-runner.test.ts',
  'packages/cli/test/e2e-overload.test.ts',
  'packages/cli/test/e2e-abandoned-soak.test.ts',
  // Nine processes (Redis, HAProxy, three edges, agents) and 1.5 s leases: kept off a busy machine.
  'packages/cli/test/e2e-cluster-lb-faults.test.ts',
  // The same, killing and restarting nodes under a steady 200 RPS.
  'packages/cli/test/e2e-cluster-lb-node-loss.test.ts',
  // `--workers 2`, a worker killed under a steady 200 RPS, its agents back within 3 s.
  'packages/cli/test/e2e-workers-crash.test.ts',
  // `pnpm bench cluster`: redis-server, HAProxy, three edges, backend and agent, with a rolling restart and
  // a kill -9 under load.
  'bench/test/bench-cluster-smoke.test.ts',
  // The verdict's real runs: a busy loop pinned to a core, and the bench's agent or itself starved on it.
  'bench/test/bench-verdict-runs.test.ts',
  // `pnpm bench h2`, `grpc` and `tls`: edges, agents, backends, h2load, grpc-js clients and HAProxy under load.
  'bench/test/bench-h2-smoke.test.ts',
  // `pnpm bench compare` on three real runs whose CPU per request it compares: other files' load would skew it.
  'bench/test/bench-compare-real.test.ts',
  'bench/test/bench-compare-p99-real.test.ts',
  // PostgreSQL, redis-server, redis-benchmark and 200 MiB each way through a TCP tunnel.
  'packages/cli/test/e2e-tcp-real.test.ts',
  // Two nodes, eight agents and 560 clients in one process, 0.6–1 GB through a link, a victim's deadline.
  'packages/cli/test/e2e-cluster-link-fairness.test.ts',
  // A full inspector store exported 16 times at once and searched 8 times: two cores' worth of CPU for
  // 15-25 s, and its event-loop bound is read from CPU time that other files' load would skew.
  'packages/inspector/test/api-abuse.test.ts',
  // Three agent processes on one name under ~500 RPS, SIGTERMed, killed and restarted.
  'packages/cli/test/e2e-replicas-faults.test.ts',
  'packages/cli/test/e2e-cluster-replicas-faults.test.ts',
];

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'bench/test/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...isolatedTests],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    setupFiles: ['./test/config-home-setup.ts'],
    reporters: ['default'],
  },
});
