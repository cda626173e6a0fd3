// Dependencies of the agent `require` Node built-ins when they load that an idle agent never uses: undici's
// HTTP/2 client loads node:http2 (and with it node:tls), ws loads node:https, node:tls and node:zlib,
// commander loads node:child_process (and with it node:dgram), undici and pino's sonic-boom load node:assert.
// Their sources and heap are ~5 MB of an idle agent's RSS (bench/README.md, "Issue #34: the workspace agent's idle memory").
// Each line below turns one such load into a proxy that loads the built-in on first use; the published bundle
// applies them when it is built (scripts/pack-cli.ts), the workspace CLI with a load hook (lazy-builtins-hook.ts).
// A dependency release without the expected line fails both loudly instead of silently loading eagerly again.

/** Where one dependency file loads a built-in eagerly, and the line that loads it on first use instead. */
interface LazyRewrite {
  /** The file, by the end of its path inside the package. */
  file: RegExp;
  replacements: readonly (readonly [eager: string, deferred: string])[];
  /** Whether a file of `file` may lack the lines (a rule for every file of a package). */
  optional?: boolean;
  /** A last check or rewrite of the whole source (after the replacements). */
  finish?: (source: string, path: string) => string;
}

/** A built-in as a value that loads it at its first property read. */
function lazy(id: string): string {
  return `new Proxy({}, { get: (_t, key) => process.getBuiltinModule(${JSON.stringify(id)})[key] })`;
}

/**
 * node:assert as the callers below use it, `assert(value, message)` and nothing else: loaded at the first
 * failure only. The check itself is cheaper than node:assert's (which takes its arguments as a rest array).
 */
const FAILURE_ONLY_ASSERT =
  "(value, message) => { if (!value) process.getBuiltinModule('node:assert')(value, message) }";

/** The rewrite of `const assert = require(...)` is only right for a file that calls it and reads no member. */
function callsAssertOnly(source: string, path: string): string {
  if (/\bassert\.\w/.test(source))
    throw new Error(`${path}: uses a member of node:assert (dependency changed?)`);
  return source;
}

/**
 * node:http2's constants that undici's HTTP/2 client reads when it loads (header names and error codes fixed
 * by RFC 9113; lazy-builtins.test.ts checks them against node:http2's own).
 */
export const UNDICI_H2_CONSTANTS: Readonly<Record<string, string | number>> = {
  HTTP2_HEADER_AUTHORITY: ':authority',
  HTTP2_HEADER_METHOD: ':method',
  HTTP2_HEADER_PATH: ':path',
  HTTP2_HEADER_SCHEME: ':scheme',
  HTTP2_HEADER_CONTENT_LENGTH: 'content-length',
  HTTP2_HEADER_EXPECT: 'expect',
  HTTP2_HEADER_STATUS: ':status',
  HTTP2_HEADER_PROTOCOL: ':protocol',
  NGHTTP2_NO_ERROR: 0,
  NGHTTP2_REFUSED_STREAM: 7,
};

/** undici destructures node:http2's constants when it loads: they come from the table above instead. */
function undiciH2Constants(source: string, path: string): string {
  const destructure = /const \{\s*constants: \{([^}]*)\}\s*\} = http2\n/.exec(source);
  if (destructure === null) throw new Error(`${path}: expected undici's http2 constants (undici changed?)`);
  const names = (destructure[1] ?? '').split(',').map((name) => name.trim());
  const unknown = names.filter((name) => name !== '' && !(name in UNDICI_H2_CONSTANTS));
  if (unknown.length > 0) throw new Error(`${path}: undici reads http2 constants ${unknown.join(', ')}`);
  return source.replace(
    destructure[0],
    `${destructure[0].slice(0, -'= http2\n'.length)}= { constants: ${JSON.stringify(UNDICI_H2_CONSTANTS)} }\n`,
  );
}

const REWRITES: readonly LazyRewrite[] = [
  {
    file: /[\\/]ws[\\/]lib[\\/]websocket\.js$/,
    replacements: [
      ["const https = require('https');", `const https = ${lazy('node:https')};`],
      ["const tls = require('tls');", `const tls = ${lazy('node:tls')};`],
    ],
  },
  {
    file: /[\\/]ws[\\/]lib[\\/]permessage-deflate\.js$/,
    replacements: [["const zlib = require('zlib');", `const zlib = ${lazy('node:zlib')};`]],
  },
  {
    file: /[\\/]undici[\\/]lib[\\/]dispatcher[\\/]client-h2\.js$/,
    replacements: [["  http2 = require('node:http2')\n", `  http2 = ${lazy('node:http2')}\n`]],
    finish: undiciH2Constants,
  },
  {
    // Most of undici's files require node:assert (as `assert(condition)` checks).
    file: /[\\/]undici[\\/]lib[\\/].*\.js$/,
    replacements: [["const assert = require('node:assert')\n", `const assert = ${FAILURE_ONLY_ASSERT}\n`]],
    optional: true,
    finish: callsAssertOnly,
  },
  {
    // pino's: sonic-boom calls it when a destination closes, thread-stream in a transport (none in the agent).
    file: /[\\/](sonic-boom|thread-stream)[\\/]index\.js$/,
    replacements: [["const assert = require('assert')\n", `const assert = ${FAILURE_ONLY_ASSERT}\n`]],
    finish: callsAssertOnly,
  },
  {
    // Only an executable subcommand (which tunnel2 has none of) spawns. `import process` read every export of
    // node:process (its report and finalization getters); the global is the same object.
    file: /[\\/]commander[\\/]lib[\\/]command\.js$/,
    replacements: [
      [
        "import childProcess from 'node:child_process';",
        `const childProcess = ${lazy('node:child_process')};`,
      ],
      ["import process from 'node:process';", 'const process = globalThis.process;'],
    ],
  },
];

/** Whether `path` is a dependency file that loads built-ins eagerly (one of those rewriteLazyBuiltins rewrites). */
export function hasLazyBuiltins(path: string): boolean {
  return path.includes('node_modules') && REWRITES.some((rewrite) => rewrite.file.test(path));
}

/**
 * The source of a dependency file with its eager built-in loads made lazy, or the source unchanged for any other
 * file. Throws when a file to rewrite lacks an expected line.
 */
export function rewriteLazyBuiltins(path: string, source: string): string {
  if (!path.includes('node_modules')) return source;
  let contents = source;
  for (const rewrite of REWRITES.filter((candidate) => candidate.file.test(path))) {
    let replaced = false;
    for (const [eager, deferred] of rewrite.replacements) {
      if (!contents.includes(eager)) {
        if (rewrite.optional) continue;
        throw new Error(`${path}: expected \`${eager.trim()}\` (dependency changed?)`);
      }
      contents = contents.replace(eager, deferred);
      replaced = true;
    }
    if (replaced && rewrite.finish !== undefined) contents = rewrite.finish(contents, path);
  }
  return contents;
}
