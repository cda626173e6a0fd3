import type { RawHeaders } from './http-head.js';

// RFC 9110 §7.6.1 connection-specific fields, plus the legacy ones proxies still see: connection,
// proxy-connection, keep-alive, te, transfer-encoding, upgrade, trailer. Checked by length first and then
// compared in place (isHopByHopName), not through a lowercase copy: every forwarded head passes every one of
// its names through here, and a copy per mixed-case name was most of what a head's filtering allocated.

/**
 * True when a field name is `lower` whatever its case, without a lowercase copy. `lower` is a lowercase
 * name. Names are latin1 strings (RawHeaders); a non-ASCII code unit falls back to `toLowerCase`, which is
 * what this stands for.
 */
export function isFieldName(name: string, lower: string): boolean {
  const length = lower.length;
  if (name.length !== length) return false;
  for (let i = 0; i < length; i++) {
    const c = name.charCodeAt(i);
    const l = lower.charCodeAt(i);
    if (c === l) continue;
    if (c > 0x7f) return name.toLowerCase() === lower;
    // An uppercase ASCII letter against its lowercase.
    if (l < 0x61 || l > 0x7a || c !== l - 0x20) return false;
  }
  return true;
}

/** True for the fields that are hop-by-hop whatever the head's Connection field says. */
export function isHopByHopName(name: string): boolean {
  switch (name.length) {
    case 2:
      return isFieldName(name, 'te');
    case 7:
      return isFieldName(name, 'upgrade') || isFieldName(name, 'trailer');
    case 10:
      return isFieldName(name, 'connection') || isFieldName(name, 'keep-alive');
    case 16:
      return isFieldName(name, 'proxy-connection');
    case 17:
      return isFieldName(name, 'transfer-encoding');
    default:
      return false;
  }
}

/**
 * The names a head's Connection fields list (lowercase, RFC 9110 §7.6.1: each is hop-by-hop too), or
 * undefined when it has none.
 */
export function connectionOptions(raw: RawHeaders): Set<string> | undefined {
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (isFieldName(raw[i]!, 'connection')) named = addConnectionOptions(raw[i + 1]!, named);
  }
  return named;
}

/**
 * Adds the names one Connection field's value lists (lowercase) to `named`, for a caller that meets the
 * field in its own pass; returns the set (undefined while nothing was listed). A name that is hop-by-hop
 * anyway is not added: most responses say `Connection: keep-alive`, which then costs no set, no split.
 */
export function addConnectionOptions(value: string, named: Set<string> | undefined): Set<string> | undefined {
  if (!value.includes(',')) return addOption(value.trim(), named);
  for (const token of value.split(',')) named = addOption(token.trim(), named);
  return named;
}

function addOption(token: string, named: Set<string> | undefined): Set<string> | undefined {
  if (token === '' || isHopByHopName(token)) return named;
  named ??= new Set();
  named.add(token.toLowerCase());
  return named;
}

/** Past this many listed names a lookup lowercases the name once instead of comparing it with each. */
const COMPARED_OPTIONS = 8;

/**
 * True when a field is not forwarded: hop-by-hop always, or listed in the head's Connection fields
 * (`named`, from connectionOptions). A few listed names (`Connection: keep-alive` on most responses) are
 * compared in place; many are looked up with one lowercase copy.
 */
export function isHopByHop(name: string, named: ReadonlySet<string> | undefined): boolean {
  if (isHopByHopName(name)) return true;
  if (named === undefined) return false;
  if (named.size > COMPARED_OPTIONS) return named.has(name.toLowerCase());
  for (const option of named) if (isFieldName(name, option)) return true;
  return false;
}

/**
 * Copies raw headers without the hop-by-hop ones, including every field named in `Connection`.
 * Order, case and repeated names of everything else are kept.
 */
export function withoutHopByHop(raw: RawHeaders): RawHeaders {
  const named = connectionOptions(raw);
  const out: RawHeaders = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (isHopByHop(raw[i]!, named)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/**
 * Removes the hop-by-hop fields (what withoutHopByHop leaves out) from `raw` itself and returns it: for a
 * list its caller owns, such as a head it has just decoded, where a copy per head was collector time
 * (issue #34). Most such lists lose nothing: an agent has already dropped these fields.
 */
export function dropHopByHop(raw: RawHeaders): RawHeaders {
  const named = connectionOptions(raw);
  let write = 0;
  for (let read = 0; read < raw.length; read += 2) {
    const name = raw[read]!;
    if (isHopByHop(name, named)) continue;
    if (write !== read) {
      raw[write] = name;
      raw[write + 1] = raw[read + 1]!;
    }
    write += 2;
  }
  if (write !== raw.length) raw.length = write;
  return raw;
}
