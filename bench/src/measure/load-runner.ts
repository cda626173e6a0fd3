import { monitorEventLoopDelay } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type { LatencyMs, SecondPoint } from '../plan/report-schema.js';
import { type RequestShape, statusMatcher } from '../plan/request-shape.js';
import type { LoadTarget } from '../stacks/bench-stack.js';
import { createLatencyRecorder } from './latency-recorder.js';
import { OutcomeCounter } from './outcome-counter.js';
import { instrumentClient, type Schedule } from './paced-client.js';
import { createSecondSeries } from './second-series.js';

/** One run of the load generator against one target. */
export interface LoadSpec {
  target: LoadTarget;
  /** Request path, e.g. /loadtest/get (when `request` is not given). */
  path: string;
  /** Method, paths (cycled per connection), headers, body and expected statuses; default GET `path`, 2xx. */
  request?: Omit<RequestShape, 'bodyFile'>;
  connections: number;
  durationSec: number;
  /** Requests per second over all connections; undefined runs closed-loop (as fast as answers come). */
  ratePerSec: number | undefined;
  /** A request with no complete answer within this time counts as a timeout. */
  timeoutSec: number;
  /** Called about once a second while the load runs. */
  onTick?: (tick: LoadTick) => void;
}

export interface LoadTick {
  elapsedSec: number;
  /** Requests finished in the last tick, per second. */
  currentRps: number;
  finished: number;
  errors: number;
  p99Ms: number;
}

export interface LoadResult {
  /** Wall time the load ran, from the first scheduled send to the stop. */
  durationSec: number;
  outcomes: OutcomeCounter;
  latency: LatencyMs;
  correctedLatency: LatencyMs;
  /** Answers timed: the samples `latency` was computed from. */
  latencySamples: number;
  /** The stage second by second. */
  perSecond: SecondPoint[];
  /** Scheduled sends skipped because the connection was still waiting for an answer. */
  missedSlots: number;
  /** p99 of this process's event-loop delay while the load ran: the generator's own health. */
  generatorLoopDelayP99Ms: number;
}

const LOOP_RESOLUTION_MS = 10;

/** autocannon's per-request options for a request shape: one entry per path, cycled by each connection. */
function requestOptions(spec: LoadSpec): Partial<autocannon.Options> {
  const shape = spec.request;
  if (shape === undefined) return {};
  const headers = { ...shape.headers, host: spec.target.host };
  const body = shape.body ?? undefined;
  return {
    method: shape.method as autocannon.Options['method'],
    ...(body === undefined ? {} : { body }),
    requests: shape.paths.map((path) => ({
      method: shape.method as autocannon.Options['method'],
      path,
      headers,
      ...(body === undefined ? {} : { body }),
    })),
  };
}

/** Runs autocannon against one target for one stage, recording every answer into HDR histograms. */
export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  // A connection sends every connections/rate seconds: the interval coordinated omission is corrected for.
  const expectedIntervalMs =
    spec.ratePerSec === undefined ? undefined : (1000 * spec.connections) / spec.ratePerSec;
  const latencies = createLatencyRecorder(expectedIntervalMs);
  const outcomes = new OutcomeCounter(
    spec.request === undefined ? undefined : statusMatcher(spec.request.expectStatus),
  );
  let missedSlots = 0;
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();

  const startAt = performance.now();
  const schedule: Schedule | undefined =
    spec.ratePerSec === undefined
      ? undefined
      : { ratePerSec: spec.ratePerSec, connections: spec.connections, startAt };
  const series = createSecondSeries(startAt);
  let clientIndex = 0;

  return new Promise<LoadResult>((resolve, reject) => {
    let ticker: NodeJS.Timeout | undefined;
    let instance: autocannon.Instance;
    try {
      instance = autocannon(
        {
          url: `${spec.target.origin}${spec.request?.paths[0] ?? spec.path}`,
          headers: { ...spec.request?.headers, host: spec.target.host },
          ...requestOptions(spec),
          connections: spec.connections,
          duration: spec.durationSec,
          timeout: spec.timeoutSec,
          pipelining: 1,
          // autocannon stops at the first sample after the duration: sample often so a stage ends on time.
          sampleInt: 100,
          setupClient: (client) =>
            instrumentClient(client, clientIndex++, schedule, {
              outcomes,
              latencies,
              series,
              onMissedSlots: (count) => {
                missedSlots += count;
              },
            }),
        },
        (err: unknown) => {
          clearInterval(ticker);
          loopDelay.disable();
          const stoppedAt = performance.now();
          const perSecond = series.finish(stoppedAt);
          if (err) {
            latencies.destroy();
            reject(err instanceof Error ? err : new Error(String(err)));
            return;
          }
          const result: LoadResult = {
            durationSec: (stoppedAt - startAt) / 1000,
            outcomes,
            latency: latencies.raw(),
            correctedLatency: latencies.corrected(),
            latencySamples: latencies.count,
            perSecond,
            missedSlots,
            // The histogram holds whole sampling periods; the delay is what exceeds the period.
            generatorLoopDelayP99Ms: Math.max(0, loopDelay.percentile(99) / 1e6 - LOOP_RESOLUTION_MS),
          };
          latencies.destroy();
          resolve(result);
        },
      );
    } catch (err) {
      loopDelay.disable();
      latencies.destroy();
      reject(err);
      return;
    }
    // autocannon reports errors of its own setup on the instance.
    instance.on('error', (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))));
    if (spec.onTick === undefined) return;
    const onTick = spec.onTick;
    let lastFinished = 0;
    let lastAt = startAt;
    ticker = setInterval(() => {
      const now = performance.now();
      const finished = outcomes.finished;
      onTick({
        elapsedSec: (now - startAt) / 1000,
        currentRps: ((finished - lastFinished) * 1000) / Math.max(1, now - lastAt),
        finished,
        errors: outcomes.errorCount(),
        p99Ms: latencies.p99(),
      });
      lastFinished = finished;
      lastAt = now;
    }, 1000);
  });
}
