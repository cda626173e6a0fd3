/** Types for malloc-arenas.js (plain JS, loaded before the Node version check). */
export declare const DEFAULT_MALLOC_ARENAS: number;
export declare function parseMallocArenas(
  value: string | undefined,
): { arenas: number } | { problem: string };
export declare function shouldLimitArenas(
  arenas: number,
  env: NodeJS.ProcessEnv,
  nodeFlags: string,
  glibcVersion: () => string | undefined,
): boolean;
export declare function runtimeGlibcVersion(): string | undefined;
export declare function execWithMallocArenas(arenas: number): void;
