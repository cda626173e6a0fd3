import type { Client } from 'autocannon';
import { BenchError, BenchErrorCode } from '../errors.js';
import type { LatencyRecorder } from './latency-recorder.js';
import { type OutcomeCounter, type TransportErrorKind, transportErrorKind } from './outcome-counter.js';
import type { SecondSeriesRecorder } from './second-series.js';

/**
 * The parts of autocannon's per-connection client (lib/httpClient.js, autocannon 9.0.0, pinned) that the
 * pacing and the loss accounting rely on. They are checked on every client so an upgrade that changes them
 * fails loudly instead of measuring something else.
 */
interface ClientInternals {
  destroyed: boolean;
  pipelinedRequests: { size(): number; clear(): void };
  /** http-parser-js: one per client, reused across reconnects. */
  parser: { type: string; initialize(type: string): void };
  _doRequest(): void;
  _connect(): void;
  on(event: 'response', listener: (status: number, bytes: number, durationMs: number) => void): unknown;
  on(event: 'connError', listener: (err: unknown) => void): unknown;
  on(event: 'timeout' | 'done', listener: () => void): unknown;
}

function internalsOf(client: Client): ClientInternals {
  const candidate = client as unknown as Partial<ClientInternals>;
  if (
    typeof candidate._doRequest !== 'function' ||
    typeof candidate._connect !== 'function' ||
    typeof candidate.pipelinedRequests?.size !== 'function' ||
    typeof candidate.pipelinedRequests.clear !== 'function' ||
    typeof candidate.parser?.initialize !== 'function'
  ) {
    throw new BenchError(
      BenchErrorCode.LOAD_GENERATOR,
      'the installed autocannon client lacks _doRequest/_connect/pipelinedRequests/parser: bench/ is written for autocannon 9.0.0',
    );
  }
  return client as unknown as ClientInternals;
}

/** The schedule of a fixed-rate stage: sends spread evenly over time, across all connections. */
export interface Schedule {
  /** Target requests per second over all connections. */
  ratePerSec: number;
  connections: number;
  /** performance.now() of the first slot. */
  startAt: number;
}

export interface ClientHooks {
  outcomes: OutcomeCounter;
  latencies: LatencyRecorder;
  /** The stage second by second: every answer and failure, at the time it happened. */
  series?: SecondSeriesRecorder;
  /** Slots skipped because the connection was still waiting for an answer (the omission HDR corrects). */
  onMissedSlots(count: number): void;
}

/**
 * Instruments one autocannon connection: counts every request's outcome, and with a schedule, paces it.
 *
 * Pacing: autocannon's own `overallRate` lets each connection send its whole quota for a second back to
 * back when the second starts, so a 1000 RPS stage is really 1000 requests in a burst followed by silence,
 * and its coordinated-omission interval is `ceil(1 / rate)` = 1 ms whatever the rate. Here connection i of
 * C sends at `startAt + i/R + k*C/R`: all sends are 1/R apart, which is a real rate of R. A connection
 * still waiting for its answer when its slot comes sends right after the answer and skips the slots that
 * passed (counted, and compensated in the corrected histogram) instead of bursting to catch up.
 *
 * Loss accounting: autocannon silently reconnects when the server closes a connection mid-response; the
 * lost request then stays at the head of its queue (every later answer on that connection would be timed
 * from the wrong start) and the parser stays in the middle of the broken message (the next answer would be
 * read as the rest of its body, with no status). Here such requests are counted as `reset` errors, dropped
 * from the queue, and the parser starts afresh on every new connection.
 */
export function instrumentClient(
  client: Client,
  index: number,
  schedule: Schedule | undefined,
  hooks: ClientHooks,
): void {
  const internals = internalsOf(client);
  const { outcomes, latencies, series } = hooks;
  const failed = (kind: TransportErrorKind, count = 1): void => {
    outcomes.failed(kind, count);
    series?.failed(count, performance.now());
  };

  internals.on('response', (status, bytes, durationMs) => {
    const ok = outcomes.response(status, bytes);
    latencies.record(durationMs);
    series?.response(durationMs, ok, performance.now());
  });

  // autocannon emits connError and then reconnects; the requests that were waiting on that socket failed.
  let lossCounted = false;
  internals.on('connError', (err) => {
    const pending = internals.pipelinedRequests.size();
    if (pending > 0) failed(transportErrorKind(err), pending);
    lossCounted = true;
  });
  // On a timeout autocannon has already dropped the request from its queue when it emits this.
  internals.on('timeout', () => failed('timeout'));

  const connect = internals._connect;
  let connected = false;
  internals._connect = function connectCounted(this: ClientInternals): void {
    const pending = internals.pipelinedRequests.size();
    if (connected && pending > 0) {
      if (!lossCounted) failed('reset', pending);
      internals.pipelinedRequests.clear();
    }
    connected = true;
    lossCounted = false;
    internals.parser.initialize(internals.parser.type);
    connect.call(this);
  };

  const send = internals._doRequest;
  const sendCounted = (): void => {
    if (internals.destroyed) return;
    outcomes.sent += 1;
    send.call(internals);
  };
  if (schedule === undefined) {
    internals._doRequest = sendCounted;
    return;
  }

  const intervalMs = (1000 * schedule.connections) / schedule.ratePerSec;
  let nextSlot = schedule.startAt + (1000 * index) / schedule.ratePerSec;
  let timer: NodeJS.Timeout | undefined;
  internals._doRequest = function sendPaced(): void {
    // autocannon calls this on every reconnect too, and reconnects at once on ECONNREFUSED: with a send
    // already planned, planning another would advance the schedule (and leave a live timer) per refusal.
    if (timer !== undefined || internals.destroyed) return;
    const now = performance.now();
    let slot = nextSlot;
    const behind = Math.floor((now - slot) / intervalMs);
    if (behind > 0) {
      hooks.onMissedSlots(behind);
      slot += behind * intervalMs;
    }
    nextSlot = slot + intervalMs;
    const wait = slot - now;
    if (wait < 1) {
      sendCounted();
      return;
    }
    timer = setTimeout(() => {
      timer = undefined;
      sendCounted();
    }, wait);
  };
  internals.on('done', () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  });
}
