#!/usr/bin/env node
// A plain-JS entry so an unsupported Node fails with one clear line instead of a syntax or import error.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`tunnel2 requires Node.js >= 22.19 (this is ${process.version})\n`);
  process.exit(1);
}
await import('../dist/main.js');
