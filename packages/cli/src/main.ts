// The `tunnel2` command line (cli-program.ts), loaded once the dependencies' eager built-in loads are made lazy:
// the hook applies only to modules loaded after it, and a static import would load them all first.
import { installLazyBuiltins } from './lazy-builtins-hook.js';

installLazyBuiltins();
await import('./cli-program.js');
