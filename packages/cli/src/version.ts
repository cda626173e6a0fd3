import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
/** The CLI package version, read once from its package.json. */
export const VERSION: string = (require('../package.json') as { version: string }).version;
