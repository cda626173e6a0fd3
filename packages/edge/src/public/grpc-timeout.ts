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

/**
 * A gRPC call's deadline from its `grpc-timeout` field (`<1-8 digits><unit>`, gRPC over HTTP/2 spec), in
 * whole milliseconds, at least 1. Undefined when absent or malformed: ignored, as gRPC servers do.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string' || value.length < 2 || value.length > 9) return undefined;
  const ms = unitMs[value[value.length - 1]!];
  if (ms === undefined) return undefined;
  const digits = value.slice(0, -1);
  if (!/^\d+$/.test(digits)) return undefined;
  const total = Math.ceil(Number(digits) * ms);
  return total > MAX_TIMER_MS ? undefined : Math.max(1, total);
}
