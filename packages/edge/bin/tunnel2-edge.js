#!/usr/bin/env node
// The edge server's executable, what the container image runs: `tunnel2-edge --help` lists every setting.
import { setFlagsFromString } from 'node:v8';
import { execWithMallocArenas, parseMallocArenas } from './malloc-arenas.js';
import { holdSemiSpace } from './young-generation.js';

// Executed again with glibc's malloc held to one arena (malloc-arenas.js says why); the container image sets
// MALLOC_ARENA_MAX itself and starts once. TUNNEL2_MALLOC_ARENAS changes the number (0 = glibc's default).
const arenaSetting = parseMallocArenas(process.env.TUNNEL2_MALLOC_ARENAS);
if ('problem' in arenaSetting) {
  process.stderr.write(`tunnel2-edge: ${arenaSetting.problem}\n`);
  process.exit(1);
}
if (!process.argv.some((arg) => arg === '--help' || arg === '-h' || arg === '--version' || arg === '-V')) {
  execWithMallocArenas(arenaSetting.arenas);
}

// Without a fixed heap growing factor V8 gives a heap this small (~13 MB live) a margin of a few MB before
// the next full collection, and the socket buffers of a transfer at line rate cross it every few MB moved:
// full collections back to back, three times the CPU per GiB (bench/README.md, optimization log). The
// container also starts node with --max-semi-space-size=2 so that those buffers die in cheap scavenges.
const growingPercent = Number(process.env.TUNNEL2_HEAP_GROWING_PERCENT || 300);
if (!(Number.isInteger(growingPercent) && growingPercent >= 0 && growingPercent <= 1000)) {
  process.stderr.write('tunnel2-edge: TUNNEL2_HEAP_GROWING_PERCENT must be an integer in [0, 1000]\n');
  process.exit(1);
}
if (growingPercent > 0) setFlagsFromString(`--heap-growing-percent=${growingPercent}`);

// V8 allocates straight into the old generation from an allocation site whose objects mostly survived a
// scavenge (pretenuring). Here that misfires: per-request objects then die in the old generation, where only
// a full collection frees them, and every old object pointing at a young one is more work for each scavenge.
// At 1,000 RPS with V8's default the edge ran a full collection every ~12 s and spent twice the time in
// scavenges (bench/README.md, optimization log). TUNNEL2_V8_PRETENURING=1 restores V8's default.
const pretenuring = process.env.TUNNEL2_V8_PRETENURING || '0';
if (pretenuring !== '0' && pretenuring !== '1') {
  process.stderr.write('tunnel2-edge: TUNNEL2_V8_PRETENURING must be 0 or 1\n');
  process.exit(1);
}
if (pretenuring === '0') setFlagsFromString('--no-allocation-site-pretenuring');

// The container starts node with --max-semi-space-size=2; started any other way, the semi-spaces are grown to
// 2 MB at start and held there instead of growing to 64 MB under load (young-generation.js: V8 reads the
// growth factor at every scavenge, so unlike the size it can be set here): the same young generation as
// `tunnel2 server`'s. 1 MB ones promoted much of what 100 requests in flight hold (bench/README.md).
const nodeFlags = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
if (!nodeFlags.includes('semi-space')) holdSemiSpace(2);

await import('../dist/main.js');
