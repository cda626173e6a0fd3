/**
 * `--json`'s `time` field: the ISO 8601 form of the current millisecond, made once per millisecond. An agent
 * under load writes a request line for every request, often several in one millisecond, and a `Date` plus
 * its `toISOString()` per line was a measurable part of its CPU per request (bench/README.md, issue #34).
 */
let lastMs = Number.NaN;
let lastIso = '';

export function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}
