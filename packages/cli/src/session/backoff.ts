export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  random?: () => number;
}

/** Exponential backoff with full jitter: many agents cut off at once do not reconnect in lockstep. */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** Math.min(attempt, 30));
  const random = options.random ?? Math.random;
  return Math.round(options.initialMs / 2 + random() * (ceiling - options.initialMs / 2));
}
