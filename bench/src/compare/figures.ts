import { type FigureKind, figureKind } from './figure-kind.js';
import { type SeriesNoise, seriesNoise } from './series-noise.js';

/**
 * Every figure of a report under a key that names the same measurement in any other report of its
 * scenario: the path to the number, with each array element named by what it measured rather than by
 * its position (`stages[200 req/s].tunnel.correctedP99Ms`, `closedLoop[tunnel 100 conn].rps`,
 * `rows[h2 tunnel rate 1000 req/s].betweenCpuPerRequestUs`). It reads every scenario's report.json the
 * same way, so a scenario added later, or a field added to one, is compared without a change here; what
 * is not a measurement (settings, the environment, the gate, a verdict, identities) is left out.
 */

export interface Figure {
  key: string;
  value: number;
  kind: FigureKind;
  /**
   * The run-to-run noise this report itself shows for the figure, as a fraction of it (0.05: 5 %): the
   * spread of its repetitions (rounds), or of its stage's seconds; null when the report shows none.
   */
  noise: number | null;
  /** A percentile the report marks as read from too few samples (`lowSamplePercentiles`). */
  lowSample: boolean;
}

/**
 * Subtrees that hold no measurement of the run: how it was set up, its own judgement, raw series, and
 * restatements (floor's and tcp's `summary` repeats its stages' figures, tcp's as the rounds' median,
 * without the seconds or rounds that give them their noise: under its key a copy would be gated against
 * the 5 % floor, while the same figure under its stage's key is compared with its own band).
 */
const SKIPPED = new Set([
  'summary',
  'schemaVersion',
  'environment',
  'settings',
  'command',
  'startedAt',
  'finishedAt',
  'gate',
  'verdict',
  'perSecond',
  'events',
  'stack',
  'warmup',
  'lowSamplePercentiles',
  'targets',
  // The load around a side (verdict-schema.ts MachineLoad): not what the code did; comparison.ts reads it.
  'machine',
]);

/** Numbers that say what was measured, or that grow with the run's length: identities, not figures. */
const NOT_FIGURES = new Set([
  'index',
  'targetRps',
  'offeredRps',
  'connections',
  'streams',
  'durationSec',
  'warmupSec',
  'round',
  'second',
  'sent',
  'requests',
  'ok',
  'bytes',
  'latencySamples',
  'cpuMs',
  'requested',
  'samples',
]);

/**
 * The fields that name an array element, in the order its name reads. `round` is left out on purpose:
 * elements that differ only by their round are repetitions of one measurement (see `collect`).
 */
const IDENTITY: ReadonlyArray<[string, (value: string | number) => string]> = [
  ['label', String],
  ['name', String],
  ['route', String],
  ['kind', String],
  ['direction', String],
  ['side', String],
  ['protocol', String],
  ['mode', String],
  ['targetRps', (v) => `${v} req/s`],
  ['connections', (v) => `${v} conn`],
  ['streams', (v) => `${v} streams`],
];

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** What an element of an array measured, from its identity fields; null when it has none. */
export function elementName(element: Record<string, unknown>): string | null {
  const parts: string[] = [];
  for (const [field, show] of IDENTITY) {
    const value = element[field];
    if (typeof value !== 'string' && typeof value !== 'number') continue;
    const text = show(value);
    // A row labelled "h2 tunnel" with side "tunnel" reads once.
    if (!parts.some((part) => part.split(' ').includes(text))) parts.push(text);
  }
  return parts.length === 0 ? null : parts.join(' ');
}

interface Context {
  noise: SeriesNoise | null;
  lowSample: readonly string[];
}

interface Sample {
  value: number;
  kind: FigureKind;
  seriesNoise: number | null;
  lowSample: boolean;
}

/** The figures of a report's JSON, by key. */
export function reportFigures(json: Record<string, unknown>): Map<string, Figure> {
  const samples = new Map<string, Sample[]>();
  walk(json, '', { noise: null, lowSample: [] }, samples);
  const figures = new Map<string, Figure>();
  for (const [key, list] of samples) {
    const first = list[0];
    if (first === undefined) continue;
    const values = list.map((s) => s.value).sort((a, b) => a - b);
    const value = median(values);
    const series = list.map((s) => s.seriesNoise).filter((n): n is number => n !== null);
    // Repetitions: how far apart they landed, over their median (the figure compared).
    const lowest = values[0] ?? value;
    const highest = values[values.length - 1] ?? value;
    const spread = list.length > 1 && value !== 0 ? (highest - lowest) / Math.abs(value) : null;
    const noises = [...series, ...(spread === null ? [] : [spread])];
    figures.set(key, {
      key,
      value,
      kind: first.kind,
      noise: noises.length === 0 ? null : Math.max(...noises),
      lowSample: list.some((s) => s.lowSample),
    });
  }
  return figures;
}

/**
 * The noise of a node without seconds of its own whose children have them (a stage of `direct`, `tunnel`
 * and `comparison`): each band the widest of theirs, so the figures made of both sides (the added p99,
 * the ratios) are as steady as the least steady side, not held to the 5 % floor.
 */
function childrenNoise(node: Record<string, unknown>): SeriesNoise | null {
  const bands = Object.values(node).flatMap((child) =>
    isRecord(child) && Array.isArray(child.perSecond) ? [seriesNoise(child.perSecond)] : [],
  );
  if (bands.length === 0) return null;
  const widest = (pick: (n: SeriesNoise) => number | null): number | null => {
    const values = bands.map(pick).filter((v): v is number => v !== null);
    return values.length === 0 ? null : Math.max(...values);
  };
  return {
    rate: widest((n) => n.rate),
    p50: widest((n) => n.p50),
    p99: widest((n) => n.p99),
    typicalSecondP99: null,
  };
}

/** The key of the figure a node's seconds give of their own (series-noise.ts `typicalSecondP99`). */
export const TYPICAL_SECOND_P99 = 'typicalSecondP99Ms';

function walk(node: Record<string, unknown>, path: string, outer: Context, out: Map<string, Sample[]>) {
  const own = Array.isArray(node.perSecond) ? seriesNoise(node.perSecond).typicalSecondP99 : null;
  if (own !== null && path !== '') {
    // A second's p99 is read from fewer samples than its stage's (the seconds' spread is its noise): it
    // is too few only where the stage's own p99 is.
    const stageLow = Array.isArray(node.lowSamplePercentiles) && node.lowSamplePercentiles.includes('p99');
    push(out, `${path}.${TYPICAL_SECOND_P99}`, {
      value: own.value,
      kind: 'p99',
      seriesNoise: own.noise,
      lowSample: stageLow,
    });
  }
  // A side that counts requests and answers but states no success rate (floor, tcp): its rate, so a rise
  // in errors is compared alike in every scenario.
  if (
    typeof node.requests === 'number' &&
    typeof node.ok === 'number' &&
    node.requests > 0 &&
    node.successPct === undefined &&
    path !== ''
  ) {
    push(out, `${path}.successPct`, {
      value: (100 * node.ok) / node.requests,
      kind: 'success',
      seriesNoise: null,
      lowSample: false,
    });
  }
  const ctx: Context = {
    noise: Array.isArray(node.perSecond) ? seriesNoise(node.perSecond) : (childrenNoise(node) ?? outer.noise),
    lowSample: Array.isArray(node.lowSamplePercentiles)
      ? node.lowSamplePercentiles.filter((p): p is string => typeof p === 'string')
      : outer.lowSample,
  };
  for (const [field, value] of Object.entries(node)) {
    if (SKIPPED.has(field)) continue;
    const key = path === '' ? field : `${path}.${field}`;
    if (typeof value === 'number') {
      if (!NOT_FIGURES.has(field) && Number.isFinite(value)) add(out, key, value, ctx);
    } else if (Array.isArray(value)) {
      value.forEach((element, i) => {
        if (!isRecord(element)) return;
        walk(element, `${key}[${elementName(element) ?? `#${i + 1}`}]`, ctx, out);
      });
    } else if (isRecord(value) && field !== 'errors') {
      walk(value, key, ctx, out);
    }
  }
}

function add(out: Map<string, Sample[]>, key: string, value: number, ctx: Context): void {
  const kind = figureKind(key);
  const leaf = key.slice(key.lastIndexOf('.') + 1);
  const percentile = /^p(50|75|90|95|99|999)(Ms)?$/.exec(leaf)?.[1];
  // A figure made of a percentile (addedP99Ms, p50Ratio, eventLoopDelayP99Ms) is as steady as it.
  const madeOf = percentile ?? /p(50|75|90|95|99|999)/i.exec(leaf)?.[1];
  const noise = ctx.noise;
  let seriesNoise: number | null = null;
  if (noise !== null) {
    if (madeOf === '50' || /^min(Ms)?$/.test(leaf)) seriesNoise = noise.p50;
    // The tail (p75 up, the mean a stall drags, the max) is as steady as the seconds' p99.
    else if (kind === 'p99' || madeOf !== undefined || /^(mean|max)(Ms)?$/.test(leaf)) {
      seriesNoise = noise.p99;
    }
    // Figures without a series of their own (CPU, RSS, ratios) get the steadiness of their stage's rate.
    else seriesNoise = noise.rate;
  }
  const lowSample =
    (percentile !== undefined && ctx.lowSample.includes(`p${percentile}`)) ||
    (kind === 'p99' && ctx.lowSample.includes('p99'));
  push(out, key, { value, kind, seriesNoise, lowSample });
}

function push(out: Map<string, Sample[]>, key: string, sample: Sample): void {
  const list = out.get(key);
  if (list === undefined) out.set(key, [sample]);
  else list.push(sample);
}

export function median(sorted: readonly number[]): number {
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] ?? Number.NaN;
  return sorted.length % 2 === 1 ? hi : ((sorted[mid - 1] ?? hi) + hi) / 2;
}
