// Runs first in `pnpm demo` and `pnpm test`, before `tsc -b` and the .ts scripts: on a Node older than
// engines.node those end in a syntax error or a stack trace about a .ts file. This file is CommonJS with old
// syntax only (no `?.`, `??`, `node:` specifiers or imports) so that any Node parses it and prints one line.
'use strict';
// biome-ignore lint/style/useNodejsImportProtocol: Node before 14.18 cannot require 'node:' specifiers.
const path = require('path');

/** One line when `version` ("v20.11.1") is older than `range` (">=22.19"), else undefined. */
function problemWith(version, range) {
  const wanted = /^>=\s*(\d+)(?:\.(\d+))?/.exec(range);
  const running = /^v?(\d+)\.(\d+)/.exec(version);
  if (!wanted || !running) return undefined;
  const major = Number(wanted[1]);
  const minor = Number(wanted[2] || 0);
  const have = Number(running[1]);
  if (have > major || (have === major && Number(running[2]) >= minor)) return undefined;
  return (
    `tunnel2 needs Node.js ${range} (engines.node); this is Node.js ${version}. ` +
    `Install Node ${wanted[2] ? `${major}.${minor}` : major} or newer from https://nodejs.org (or: nvm install ${major} && nvm use ${major}), ` +
    'then run this again.'
  );
}

const problem = problemWith(
  process.version,
  require(path.join(__dirname, '..', 'package.json')).engines.node,
);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
