import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * The public requests' counts and durations as plain numbers, handed to prom-client at scrape time. Each
 * request used to go through prom-client itself (a histogram `observe` and a labelled counter `inc`): label
 * hashes, a closure and a few objects per request, 1.5–2 µs of the edge's samples per request in issue #34's
 * closed-loop profile. Here a request costs a bucket search and a few additions.
 */
export class RequestTally {
  /** Complete responses by status class, 1xx to 5xx. */
  readonly byClass: number[] = [0, 0, 0, 0, 0];
  /** Responses that were not completed (the client left, the edge aborted). */
  aborted = 0;
  readonly bounds: readonly number[];
  /** Durations per bucket (not cumulative); the last one counts those above every bound. */
  readonly buckets: number[];
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.buckets = new Array<number>(bounds.length + 1).fill(0);
  }

  /** A response closed after `seconds` (undefined: not timed), complete with `status` or not. */
  record(seconds: number | undefined, complete: boolean, status: number): void {
    if (seconds !== undefined) {
      // As prom-client: the first bucket whose bound is at least the value.
      const bounds = this.bounds;
      let i = 0;
      while (i < bounds.length && seconds > bounds[i]!) i++;
      this.buckets[i]!++;
      this.sum += seconds;
      this.count++;
    }
    if (!complete) this.aborted++;
    else this.byClass[Math.min(4, Math.max(0, Math.floor(status / 100) - 1))]!++;
  }
}

const statusClasses = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/**
 * The tally's counts as a counter labelled `class` (1xx–5xx, aborted): a class shows once it has counted a
 * request, as when each request incremented it.
 */
export function requestCounter(registry: Registry, name: string, help: string, tally: RequestTally): Counter {
  return new Counter({
    name,
    help,
    labelNames: ['class'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [i, n] of tally.byClass.entries()) if (n > 0) this.inc({ class: statusClasses[i]! }, n);
      if (tally.aborted > 0) this.inc({ class: 'aborted' }, tally.aborted);
    },
  });
}

/** One series as prom-client's histogram hands it to the registry (before `get` spreads `sharedLabels`). */
interface SeriesValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  /** prom-client's shape: null on a bucket, undefined on the sum and count (this histogram keeps none). */
  exemplar: null | undefined;
}

/**
 * The tally's durations as a histogram without labels: the same series, in the same order, as a
 * prom-client Histogram with these buckets that observed each duration (request-tally.test.ts compares
 * the renderings, text and `get()`).
 */
export class TalliedHistogram extends Histogram {
  readonly #tally: RequestTally;
  readonly #name: string;
  readonly #help: string;

  constructor(registry: Registry, name: string, help: string, tally: RequestTally) {
    super({ name, help, buckets: [...tally.bounds], registers: [registry] });
    this.#tally = tally;
    this.#name = name;
    this.#help = help;
  }

  /**
   * prom-client's own source of a histogram's values (untyped in its declarations): the registry renders
   * the text from it, and `get()` spreads it. Read from the tally instead of the (never observed) series.
   */
  async getForPromString(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    values: SeriesValue[];
    aggregator: 'sum';
  }> {
    const tally = this.#tally;
    const name = this.#name;
    const values: SeriesValue[] = [];
    const series = (labels: SeriesValue['labels'], value: number, suffix: string): void => {
      const exemplar = suffix === '_bucket' ? null : undefined;
      values.push({ labels, sharedLabels: {}, value, metricName: `${name}${suffix}`, exemplar });
    };
    let below = 0;
    for (const [i, bound] of tally.bounds.entries()) {
      below += tally.buckets[i]!;
      series({ le: bound }, below, '_bucket');
    }
    series({ le: '+Inf' }, tally.count, '_bucket');
    series({}, tally.sum, '_sum');
    series({}, tally.count, '_count');
    return { name, help: this.#help, type: 'histogram', values, aggregator: 'sum' };
  }
}
