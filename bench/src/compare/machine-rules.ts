import type { Figure } from './figures.js';

/**
 * What the machine alone moved a figure by between the two runs: the change of figures beside it whose
 * code is the same in both runs. comparison.ts widens a figure's noise band by it, so a busy machine is not
 * read as the change's doing.
 */

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const changePct = (b: number | undefined, h: number | undefined): number | null =>
  b === undefined || h === undefined || b === 0 ? null : ((h - b) / Math.abs(b)) * 100;

/**
 * The CPU per request of the processes the kit runs with the same code in both runs, the load generator
 * and its own test backend, beside a figure (`<side>.generator.cpuPerRequestUs`, `backendCpuPerRequestUs`,
 * `cpuPerRequestUs.backend`): what they moved by is what the machine alone moved CPU per request by
 * between the two runs (other work on it, a cold first run). Measured here: two runs of one build whose
 * backend and generator moved 29 % and 28 %, the tunnel's CPU per request with them.
 */
const CONTROLS = [
  '.generator.cpuPerRequestUs',
  '.backend.cpuPerRequestUs',
  '.backendCpuPerRequestUs',
  '.cpuPerRequestUs.backend',
];

/** The largest change, in %, of the control figures nearest to `key` (same side, same stage). */
export function machineCpuChangePct(
  key: string,
  before: ReadonlyMap<string, Figure>,
  after: ReadonlyMap<string, Figure>,
): number | null {
  return nearest(key, (prefix) => {
    const changes = CONTROLS.flatMap((control) => {
      const change = changePct(before.get(prefix + control)?.value, after.get(prefix + control)?.value);
      return change === null ? [] : [Math.abs(change)];
    });
    return changes.length > 0 ? Math.max(...changes) : null;
  });
}

/** The first answer `read` gives for `key`'s parents, nearest first (its side, then its stage, …). */
function nearest(key: string, read: (prefix: string) => number | null): number | null {
  let prefix = key;
  while (prefix.includes('.')) {
    prefix = prefix.slice(0, prefix.lastIndexOf('.'));
    const found = read(prefix);
    if (found !== null) return found;
  }
  return null;
}

/**
 * The p99 of the load generator's own event loop delay beside a latency figure (same side, same stage): a
 * generator whose loop is held answers late to every request it times, whatever the tunnel did, and its
 * code is the same in both runs. Measured here (load average 9 on two cores): two runs of one build whose
 * tunnel p99 of the typical second went 8.8 → 54 ms with the generator's loop delay p99 2.3 → 29 ms.
 */
const LATENCY_CONTROL = '.generator.eventLoopDelayP99Ms';

/** How much the generator's loop delay p99 nearest to `key` rose, in %; null when it did not or is not there. */
export function machineLatencyChangePct(
  key: string,
  before: ReadonlyMap<string, Figure>,
  after: ReadonlyMap<string, Figure>,
): number | null {
  // The nearest generator's figure answers, rise or fall: a fall is not looked past to a farther one.
  const change = nearest(key, (prefix) =>
    changePct(before.get(prefix + LATENCY_CONTROL)?.value, after.get(prefix + LATENCY_CONTROL)?.value),
  );
  return change !== null && change > 0 ? change : null;
}

/**
 * The floors a side is measured against, by the side's name: the same load sent straight to the kit's
 * backend (`direct`), and through the kit's plain relays (floor's `relay`, `http-relay`; tcp's `floor`). Their code is
 * the kit's, the same in both runs: what they moved by, the way the figure moved, is the machine (two
 * `floor` runs of one build here: the relay rate −20.7 % with the direct rate beside it; reversed
 * `tcp --size 16` runs: the direct side −62 % and −87 %).
 */
const FLOORS: Record<string, readonly string[]> = {
  tunnel: ['direct', 'relay', 'http-relay', 'floor'],
  relay: ['direct'],
  'http-relay': ['direct'],
  floor: ['direct'],
};

/** A figure of a floor side itself (`.direct.`, `[relay rate …]`): what the tunnel is measured against. */
export function isFloor(key: string): boolean {
  return /(?<=[.[ ])(direct|relay|http-relay|floor)(?=[.\] ]|$)/.test(key);
}

/** The same figure in each floor of its side: the key with the side's name swapped, where it is one. */
export function floorKeys(key: string): string[] {
  const keys = new Set<string>();
  for (const [side, floors] of Object.entries(FLOORS)) {
    // The side as a key segment (`.tunnel.`) or a word of an element's name (`[tunnel rate ...]`).
    const pattern = new RegExp(`(?<=[.[ ])${side}(?=[.\\] ]|$)`, 'g');
    if (!pattern.test(key)) continue;
    for (const floor of floors) keys.add(key.replace(pattern, floor));
  }
  keys.delete(key);
  return [...keys];
}

/**
 * What the same figure moved by in its floors, in %: `sameWay` the largest move the way `change` went
 * (that much of the change is the machine's), `any` the largest either way (the machine's state differed
 * that much between the runs: two `tcp --size 16` runs of one build here moved the direct side's rate
 * +120 % and the tunnel's −33 %, in turns of a few seconds each). Null when it has no floor. Not for a
 * run against the user's own service (`--target`): its direct side is that service, whose code may be
 * what changed.
 */
export function machineFloorChangePct(
  key: string,
  change: number,
  before: ReadonlyMap<string, Figure>,
  after: ReadonlyMap<string, Figure>,
): { sameWay: number; any: number } | null {
  const moves = floorKeys(key).flatMap((floor) => {
    const moved = changePct(before.get(floor)?.value, after.get(floor)?.value);
    return moved === null ? [] : [moved];
  });
  if (moves.length === 0) return null;
  const same = moves.filter((m) => Math.sign(m) === Math.sign(change)).map(Math.abs);
  return { sameWay: same.length === 0 ? 0 : Math.max(...same), any: Math.max(...moves.map(Math.abs)) };
}

/** Whether the run's direct side was the user's service (`--target`), not the kit's own backend. */
export function ranAgainstTarget(json: Record<string, unknown>): boolean {
  const settings = [json.settings, isRecord(json.result) ? json.result.settings : undefined];
  return settings.some((s) => isRecord(s) && typeof s.targetUrl === 'string' && s.targetUrl !== '');
}

/** The 1-minute load average over a report's sides (`machine`, verdict-schema.ts MachineLoad); null: none. */
export function meanLoadAverage(json: Record<string, unknown>): number | null {
  const loads: number[] = [];
  const visit = (node: unknown, depth: number): void => {
    if (depth > 64) return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item, depth + 1);
      return;
    }
    if (!isRecord(node)) return;
    for (const [field, value] of Object.entries(node)) {
      if (field === 'perSecond') continue;
      if (field === 'machine' && isRecord(value)) {
        for (const v of [value.loadAverageBefore, value.loadAverageAfter]) {
          if (typeof v === 'number' && Number.isFinite(v) && v >= 0) loads.push(v);
        }
      } else visit(value, depth + 1);
    }
  };
  visit(json, 0);
  return loads.length === 0 ? null : loads.reduce((a, b) => a + b, 0) / loads.length;
}

/** Head's load average this many times base's (and one more process at least) is a busier machine. */
const BUSIER_RATIO = 1.5;
const BUSIER_MIN_DIFFERENCE = 1;

/** A warning when one run's machine was clearly busier than the other's; null when alike or unknown. */
export function loadWarning(base: Record<string, unknown>, head: Record<string, unknown>): string | null {
  const b = meanLoadAverage(base);
  const h = meanLoadAverage(head);
  if (b === null || h === null) return null;
  const [busier, quieter, hi, lo] = h >= b ? ['head', 'base', h, b] : ['base', 'head', b, h];
  if (hi - lo < BUSIER_MIN_DIFFERENCE || hi < lo * BUSIER_RATIO) return null;
  return (
    `The machine was busier in ${busier} than in ${quieter} (load average ${b.toFixed(1)} in base, ` +
    `${h.toFixed(1)} in head, over the measured parts): a change may be the machine's, not the code's.`
  );
}
