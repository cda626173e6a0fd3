import {
  addConnectionOptions,
  connectionOptions,
  isFieldName,
  isHopByHop,
  isHopByHopName,
  type RawHeaders,
} from '@tunnel2/protocol';
import type { HostHeaderMode } from './forward-options.js';
import type { Target } from './target.js';

/** undici's raw fields: latin1 bytes from its HTTP/1.1 parser (or strings), or a parsed object (never here). */
export type UndiciRawHeaders = Buffer[] | string[] | Record<string, unknown> | null | undefined;

/**
 * A request head as the agent sends it to the local target: hop-by-hop fields and Expect out (undici refuses
 * it; the edge already answered 100), Host first and as `mode` says (the target's, the public one, or a
 * given value). The inspector's replays go through it too.
 *
 * One pass from the decoded head to the list undici takes, names compared in place: the agent's per-request
 * allocation is its collector's time (a 3 MB young generation), and the head was copied twice on the way
 * (a hop-by-hop copy, then this one with Host put in front) with a lowercase copy of every name in each.
 */
export function forwardHeaders(raw: RawHeaders, target: Target, mode: HostHeaderMode): string[] {
  const named = connectionOptions(raw);
  // Host's place is kept at the front; the public one is known only once the head has been read.
  const out: string[] = ['host', mode === 'rewrite' ? target.host : mode === 'preserve' ? '' : mode.value];
  let publicHost: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (isHopByHop(name, named)) continue;
    if (isFieldName(name, 'host')) {
      publicHost = raw[i + 1];
      continue;
    }
    if (isFieldName(name, 'expect')) continue;
    out.push(name, raw[i + 1]!);
  }
  if (mode === 'preserve') {
    if (publicHost === undefined) out.splice(0, 2);
    else out[1] = publicHost;
  }
  return out;
}

/**
 * A response head's fields as the agent sends them back: undici's raw fields as strings, hop-by-hop ones
 * (those the Connection fields name included) left out, order, case and repeats kept; what
 * `withoutHopByHop(rawHeaderStrings(raw))` gives, in one list: a dropped field's value is never made a
 * string, and the second copy is not made.
 */
export function responseFields(raw: UndiciRawHeaders): RawHeaders {
  if (!Array.isArray(raw)) return [];
  const out: RawHeaders = [];
  let named: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = latin1(raw[i]!);
    if (isHopByHopName(name)) {
      if (isFieldName(name, 'connection')) named = addConnectionOptions(latin1(raw[i + 1]!), named);
      continue;
    }
    out.push(name, latin1(raw[i + 1]!));
  }
  if (named === undefined) return out;
  // A field the Connection fields name may come before them: taken out now, in place.
  let write = 0;
  for (let read = 0; read < out.length; read += 2) {
    if (isHopByHop(out[read]!, named)) continue;
    out[write] = out[read]!;
    out[write + 1] = out[read + 1]!;
    write += 2;
  }
  out.length = write;
  return out;
}

/** undici's raw fields as strings, all of them (a response's trailers). */
export function rawHeaderStrings(raw: UndiciRawHeaders): RawHeaders {
  if (!Array.isArray(raw)) return [];
  const out: RawHeaders = new Array<string>(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = latin1(raw[i]!);
  return out;
}

function latin1(field: Buffer | string): string {
  return typeof field === 'string' ? field : field.toString('latin1');
}
