// Plain JS, like tunnel2.js beside it: it is loaded before the Node version check runs, so it uses only syntax
// that old Node versions parse.
// biome-ignore lint/style/useNodejsImportProtocol: Node before 14.13 cannot import 'node:' specifiers, and the bin must still reach its version check there.
import { setFlagsFromString } from 'v8';

/**
 * Runs `load` with V8's optimizing compiler (TurboFan) held off until the promise it returns settles.
 * Loading the CLI's modules makes Node's own path functions hot (its loader resolves each of ~180 files, under
 * pnpm's long `node_modules/.pnpm/...` paths in the repository), and TurboFan compiling them pages in ~5 MiB of
 * the node binary's code that an idle agent never needs: the workspace agent sat 9-10 MiB over the published
 * bundle at idle, 3.4 with the compiler held (bench/README.md, optimization log). Maglev still compiles what
 * is hot meanwhile, and every function tiers up to TurboFan as usual once the flag is back, so requests run
 * in the same code. Nothing is held when the node flags already decide about TurboFan (`--no-turbofan`,
 * `--jitless`, ...), nor with TUNNEL2_HOLD_TURBOFAN=0.
 * @param {() => Promise<unknown>} load
 * @param {string} nodeFlags the process's execArgv and NODE_OPTIONS, space-separated
 * @returns {Promise<unknown>}
 */
export function loadWithoutOptimizingCompiler(load, nodeFlags) {
  if (/turbofan|jitless|max-opt/.test(nodeFlags) || process.env.TUNNEL2_HOLD_TURBOFAN === '0') {
    return load();
  }
  setFlagsFromString('--no-turbofan');
  const resume = () => setFlagsFromString('--turbofan');
  const loaded = load();
  loaded.then(resume, resume);
  return loaded;
}
