/**
 * Milliseconds since the Unix epoch. Injected rather than read from `Date.now()` so tests move time by
 * hand (no sleeps) and every lease decision in one registry reads the same source.
 */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();
