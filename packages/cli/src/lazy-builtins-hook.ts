import { hasLazyBuiltins, rewriteLazyBuiltins } from './lazy-builtins.js';

/**
 * Makes the eager built-in loads of the agent's dependencies lazy in the workspace CLI (lazy-builtins.ts): a
 * load hook rewrites those few files as Node reads them. Installed before the CLI imports any dependency; the
 * published bundle has the files rewritten already and gets an empty function (scripts/pack-cli.ts). A Node
 * without synchronous load hooks (before 22.15) loads the dependencies as they are.
 */
export function installLazyBuiltins(): void {
  const { registerHooks } = process.getBuiltinModule('node:module');
  if (typeof registerHooks !== 'function') return;
  registerHooks({
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context);
      if (!url.startsWith('file:') || !hasLazyBuiltins(url) || loaded.source == null) return loaded;
      const source =
        typeof loaded.source === 'string' ? loaded.source : new TextDecoder().decode(loaded.source);
      return { ...loaded, source: rewriteLazyBuiltins(url, source) };
    },
  });
}
