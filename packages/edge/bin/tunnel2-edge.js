#!/usr/bin/env node
// The edge server's executable, what the container image runs: `tunnel2-edge --help` lists every setting.
import { setFlagsFromString } from 'node:v8';

// Without a fixed heap growing factor V8 gives a heap this small (~13 MB live) a margin of a few MB before
// the next full collection, and the socket buffers of a transfer at line rate cross it every few MB moved:
// full collections back to back, three times the CPU per GiB (bench/README.md, optimization log). The
// container also starts node with --max-semi-space-size=1 so that those buffers die in cheap scavenges.
const growingPercent = Number(process.env.TUNNEL2_HEAP_GROWING_PERCENT || 300);
if (!(Number.isInteger(growingPercent) && growingPercent >= 0 && growingPercent <= 1000)) {
  process.stderr.write('tunnel2-edge: TUNNEL2_HEAP_GROWING_PERCENT must be an integer in [0, 1000]\n');
  process.exit(1);
}
if (growingPercent > 0) setFlagsFromString(`--heap-growing-percent=${growingPercent}`);

await import('../dist/main.js');
