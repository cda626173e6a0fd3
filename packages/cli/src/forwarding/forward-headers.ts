import { connectionOptions, isFieldName, isHopByHop, type RawHeaders } from '@tunnel2/protocol';
import type { HostHeaderMode } from './forward-options.js';
import type { Target } from './target.js';

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
