import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the kit finds the programs it starts and puts its reports, in the repository's layout (workspace
 * packages, bench/results). scripts/pack-bench.ts swaps this module for the published package's layout
 * (the tunnel2 CLI as a dependency, the test backend bundled beside the entry, reports under the folder
 * the user runs in), so that nothing else knows how it was installed.
 */
export const runtime = {
  /** How a user runs the kit, as reports quote the command. */
  command: 'pnpm bench',
  /** The standalone scenarios (bulk, sessions, ...) need repository files beside the kit. */
  standalone: true,
  cliBin: (): string => join(packageDir('@tunnel2/cli'), 'bin', 'tunnel2.js'),
  testBackendBin: (): string => join(packageDir('@tunnel2/test-backend'), 'bin', 'test-backend.js'),
  /** Versions of bundled packages the report names (the published bundle has no package.json of theirs). */
  versions: {} as Record<string, string>,
  /** Reports go to `<root>/<scenario>-<time>` when --out is not given. */
  resultsRoot: (): string => fileURLToPath(new URL('../results', import.meta.url)),
};

function packageDir(name: string): string {
  return dirname(fileURLToPath(import.meta.resolve(`${name}/package.json`)));
}
