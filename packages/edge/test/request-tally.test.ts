import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestTally, requestCounter, TalliedHistogram } from '../src/operations/request-tally.js';

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const NAME = 'tunnel2_http_request_duration_seconds';
const HELP = 'Public HTTP request duration';
const COUNTER = 'tunnel2_http_requests_total';

/** The edge's tally and, beside it, prom-client's own metrics fed per request as the edge used to. */
function pair() {
  const tallied = new Registry();
  const tally = new RequestTally(BOUNDS);
  const requests = requestCounter(tallied, COUNTER, 'Requests', tally);
  const histogram = new TalliedHistogram(tallied, NAME, HELP, tally);
  const direct = new Registry();
  // Registered in the tallied registry's order (the edge's: the counter, then the histogram).
  const directCounter = new Counter({
    name: COUNTER,
    help: 'Requests',
    labelNames: ['class'],
    registers: [direct],
  });
  const directHistogram = new Histogram({ name: NAME, help: HELP, buckets: BOUNDS, registers: [direct] });
  const record = (seconds: number | undefined, complete: boolean, status: number): void => {
    tally.record(seconds, complete, status);
    if (seconds !== undefined) directHistogram.observe(seconds);
    if (!complete) directCounter.inc({ class: 'aborted' });
    else directCounter.inc({ class: ['1xx', '2xx', '3xx', '4xx', '5xx'][Math.floor(status / 100) - 1]! });
  };
  return { tallied, direct, record, requests, histogram, directHistogram, directCounter };
}

describe('request tally', () => {
  it('renders as prom-client does with nothing counted', async () => {
    const { tallied, direct } = pair();
    expect(await tallied.getSingleMetricAsString(NAME)).toBe(await direct.getSingleMetricAsString(NAME));
    expect(await tallied.getSingleMetricAsString(COUNTER)).toBe(
      await direct.getSingleMetricAsString(COUNTER),
    );
  });

  it('renders the same text and the same get() as prom-client fed per request', async () => {
    const { tallied, direct, record, requests, histogram, directHistogram, directCounter } = pair();
    // Every bound exactly (a value equal to a bound is in that bucket), between bounds, above all of them.
    for (const bound of BOUNDS) record(bound, true, 200);
    for (const seconds of [0, 0.0049, 0.007, 0.3, 7, 299.9, 301, 1e6]) record(seconds, true, 404);
    record(0.02, false, 200);
    record(undefined, true, 503);
    record(0.2, true, 101);
    record(0.2, true, 302);
    expect(await tallied.getSingleMetricAsString(NAME)).toBe(await direct.getSingleMetricAsString(NAME));
    expect(await histogram.get()).toEqual(await directHistogram.get());
    // The classes in a fixed order rather than in the order they were first seen: the same series.
    const byClass = async (counter: Counter) =>
      (await counter.get()).values.map((v) => `${v.labels.class} ${v.value}`).sort();
    expect(await byClass(requests)).toEqual(await byClass(directCounter));
    // Merged across workers (the aggregator reads get()): the same shape.
    const shapes = async (registry: Registry) =>
      (await registry.getMetricsAsJSON()).map((m) => `${m.name} ${m.type} ${m.aggregator}`).sort();
    expect(await shapes(tallied)).toEqual(await shapes(direct));
  });

  it('scrape after scrape, with requests between them: neither reset nor counted twice', async () => {
    const { tallied, direct, record } = pair();
    const same = async (): Promise<void> => {
      for (const name of [NAME, COUNTER])
        expect(await tallied.getSingleMetricAsString(name)).toBe(await direct.getSingleMetricAsString(name));
      // The whole page too, as /metrics renders it.
      expect(await tallied.metrics()).toBe(await direct.metrics());
    };
    for (let round = 0; round < 3; round++) {
      record(0.003 * (round + 1), true, 200);
      record(0.2, round !== 1, 500);
      await same();
      await same();
    }
  });
});
