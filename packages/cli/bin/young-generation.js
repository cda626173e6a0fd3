// Plain JS, like tunnel2.js beside it: it is loaded before the Node version check runs, so it uses only syntax
// that old Node versions parse.
// biome-ignore lint/style/useNodejsImportProtocol: Node before 14.13 cannot import 'node:' specifiers, and the bin must still reach its version check there.
import { getHeapSpaceStatistics, setFlagsFromString } from 'v8';

/** Survivors allocated per round while the young generation grows (~100 KB each). */
const ROUND_OBJECTS = 2048;
/** Rounds at most: a V8 that does not grow the space as expected gives up here (~23 ms for 1 → 2 MB). */
const MAX_ROUNDS = 200;

function newSpaceBytes() {
  const spaces = getHeapSpaceStatistics();
  for (let i = 0; i < spaces.length; i++) {
    if (spaces[i].space_name === 'new_space') return spaces[i].space_size;
  }
  return 0;
}

/**
 * Holds the main thread's young generation at `semiSpaceMb` MB semi-spaces. Their size can be given to node
 * only, before the heap exists; whether they grow is read at every scavenge (V8's growth factor). Left to
 * V8 they grow to 64 MB under a proxy's load; held at the initial 1 MB, 100 requests in flight are promoted
 * and the old generation grows by the heap growing factor (bench/README.md, optimization log). Growing them
 * under load and stopping once they are large enough overshoots (a gc observer hears of a scavenge an event
 * loop turn later, and a bulk transfer's turns scavenge many times): they are grown here, at start, by
 * allocating survivors until V8 has doubled them to the size (about 20 ms; the survivors are garbage of
 * the old generation until its next full collection), and held there.
 */
export function holdSemiSpace(semiSpaceMb) {
  // The new space's size counts both semi-spaces.
  const target = semiSpaceMb * 2 * 1024 * 1024;
  // 1 MB is V8's own start (its first scavenges double the initial space to it): nothing to grow.
  if (semiSpaceMb > 1 && newSpaceBytes() < target) {
    // From V8's 1 MB start, a factor of the size itself reaches it in one step (3 MB is no power of two).
    setFlagsFromString(`--semi-space-growth-factor=${Number.isInteger(semiSpaceMb) ? semiSpaceMb : 2}`);
    let survivors = [];
    for (let round = 0; round < MAX_ROUNDS && newSpaceBytes() < target; round++) {
      for (let i = 0; i < ROUND_OBJECTS; i++) survivors.push({ a: i, b: i, c: i, d: i, e: i });
    }
    survivors = undefined;
  }
  setFlagsFromString('--semi-space-growth-factor=1');
}
