import type { RawHeaders } from './http-head.js';

/** RFC 9110 §7.6.1 connection-specific fields, plus the legacy ones proxies still see. */
const alwaysHopByHop = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'transfer-encoding',
  'upgrade',
  'trailer',
]);

/**
 * Copies raw headers without the hop-by-hop ones, including every field named in `Connection`.
 * Order, case and repeated names of everything else are kept.
 */
export function withoutHopByHop(raw: RawHeaders): RawHeaders {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 10 && raw[i]!.toLowerCase() === 'connection') {
      for (const token of raw[i + 1]!.split(',')) {
        const name = token.trim().toLowerCase();
        if (name === '') continue;
        named ??= new Set();
        named.add(name);
      }
    }
  }
  const out: RawHeaders = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Most names have none of the fixed names' lengths: no lowercase copy for them unless Connection
    // named others (the edge runs this on every request and response head, issue #34).
    if (named !== undefined || hopByHopLength(name.length)) {
      const lower = name.toLowerCase();
      if (alwaysHopByHop.has(lower) || named?.has(lower)) continue;
    }
    out.push(name, raw[i + 1]!);
  }
  return out;
}

/**
 * The lengths of the names in `alwaysHopByHop` (2, 7, 10, 16 and 17) as bits, derived from the set so a
 * name added there cannot be skipped here (it would pass through unless written in lowercase).
 */
const hopByHopLengths = [...alwaysHopByHop].reduce(
  (bits, name) => (name.length < 32 ? bits | (1 << name.length) : bits),
  0,
);

/** True when a name of length `n` may be one of them (any name of 32 or more is lowercased and looked up). */
function hopByHopLength(n: number): boolean {
  return n >= 32 || ((hopByHopLengths >>> n) & 1) === 1;
}
