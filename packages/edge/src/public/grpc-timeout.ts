/** Milliseconds per unit of a `grpc-timeout` value (Hours, Minutes, Seconds, milli-, micro-, nanoseconds). */
const unitMs: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** The longest deadline a timer can hold (setTimeout's bound); a longer one is as good as none. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The spec's TimeoutValue: at most 8 digits. */
const MAX_VALUE = 99_999_999;

/**
 * A `grpc-timeout` field's value (`<1-8 digits><unit>`, gRPC over HTTP/2 spec) in milliseconds, exactly
 * as its unit says. Undefined when absent, malformed, or longer than a timer can hold.
 */
export function grpcTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string' || value.length < 2 || value.length > 9) return undefined;
  const ms = unitMs[value[value.length - 1]!];
  if (ms === undefined) return undefined;
  const digits = value.slice(0, -1);
  if (!/^\d+$/.test(digits)) return undefined;
  const total = Number(digits) * ms;
  return Math.ceil(total) > MAX_TIMER_MS ? undefined : total;
}

/**
 * A gRPC call's deadline from its `grpc-timeout` field, in whole milliseconds, at least 1. Undefined when
 * absent or malformed: ignored, as gRPC servers do.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  const total = grpcTimeoutMs(value);
  return total === undefined ? undefined : Math.max(1, Math.ceil(total));
}

/** From milliseconds up: each unit and how many of the one before it make one. */
const coarser: readonly (readonly [string, number])[] = [
  ['S', 1_000],
  ['M', 60],
  ['H', 60],
];

/**
 * A time left as a `grpc-timeout` value, as a gRPC client passes its deadline on: whole milliseconds,
 * rounded down (never more than what is left), written in the coarsest unit that states them exactly, or
 * rounded down further to a coarser unit when they need more than the spec's 8 digits (grpc-java also
 * truncates; grpc-go and grpc-js round up, which can promise a server time the call no longer has).
 */
export function formatGrpcTimeout(ms: number): string {
  let value = Math.max(0, Math.floor(ms));
  let unit = 'm';
  if (value === 0) return '0m';
  for (const [next, factor] of coarser) {
    if (value % factor !== 0 && value <= MAX_VALUE) break;
    value = Math.floor(value / factor);
    unit = next;
  }
  return `${value}${unit}`;
}
