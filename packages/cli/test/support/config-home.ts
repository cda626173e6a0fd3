import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A spawned CLI's environment with its own config directory (XDG_CONFIG_HOME), unless the test chose one.
 * A token-less CLI keeps its agent key there (agent-key.ts): processes sharing one key are one owner to an
 * edge, so two agents of a test would take names over from each other instead of being refused; and a
 * test must never write into the real ~/.config. `cleanup` removes the directory once the process ended.
 */
export function withOwnConfigHome(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; cleanup: () => void } {
  if ('XDG_CONFIG_HOME' in env) return { env, cleanup: () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'tunnel2-config-'));
  return {
    env: { ...env, XDG_CONFIG_HOME: dir },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
